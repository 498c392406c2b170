"""A real `pier up` listening beyond loopback (0.0.0.0, called on 127.0.0.1), with keys made by the real CLI,
called by boto3, openai and httpx: revoking the last key, deleting keys.json or emptying it shuts the gateway
(every call refused, saying how to create a key), never opens it; a SigV4 signature for another service or a
region that does not exist is refused as AWS refuses it; only pier's own origin and the listed one are trusted."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import openai
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

LISTED_ORIGIN = "http://localhost:3000"
LIST_MODELS = {"X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"}


def pier(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pier", *args, "--state-dir", str(state_dir)],
                          env=pier_environment(COLUMNS="200"), capture_output=True, text=True, timeout=120)


def create_key(state_dir: Path, name: str) -> dict[str, Any]:
    made = pier(state_dir, "keys", "create", name, "--role", "admin", "--json")
    assert made.returncode == 0, made.stderr
    return dict(json.loads(made.stdout))


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path, dict[str, Any]]]:
    state_dir = tmp_path / "state"
    key = create_key(state_dir, "ops")
    port = free_port()
    argv = [sys.executable, "-m", "pier.gateway", "--host", "0.0.0.0", "--port", str(port), "--state-dir",
            str(state_dir), "--allow-origin", LISTED_ORIGIN]
    with ServerProcess(argv, port, tmp_path / "gateway.log", pier_environment(OMP_WAIT_POLICY="passive")) as process:
        process.wait_ready()
        yield process, state_dir, key


def sagemaker(url: str, key: dict[str, Any] | None, region: str = "us-east-1", signing_name: str | None = None
              ) -> Any:
    config = Config(retries={"max_attempts": 1}, signature_version=UNSIGNED if key is None else None)
    client = boto3.client("sagemaker", endpoint_url=url, region_name=region, config=config,
                          aws_access_key_id=key["access_key_id"] if key else "unused",
                          aws_secret_access_key=key["secret_access_key"] if key else "unused")
    if signing_name is not None:  # as a client for another service signs: the scope botocore signs with
        def sign_as(request: Any, **_: Any) -> None:
            request.context.setdefault("signing", {})["signing_name"] = signing_name

        client.meta.events.register("before-sign.sagemaker", sign_as)
    return client


def refused(call: Callable[[], object]) -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        call()
    return dict(raised.value.response["Error"])


def models(url: str, api_key: str) -> list[str]:
    return [m.id for m in openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0).models.list()]


def assert_shut(url: str, key: dict[str, Any]) -> None:
    """Every way in is refused, each refusal saying how to create a key."""
    for client in (sagemaker(url, key), sagemaker(url, None)):
        error = refused(client.list_models)
        assert error["Code"] == "UnrecognizedClientException", error
        assert "refuses every call" in error["Message"] and "pier keys create NAME --role admin" in error["Message"]
    with pytest.raises(openai.AuthenticationError) as raised:
        models(url, key["api_key"])
    assert "pier keys create" in raised.value.message
    assert httpx.post(url, headers=LIST_MODELS, content=b"{}").status_code == 403  # no credentials at all
    assert httpx.get(url + "/ping").status_code == 200  # health checks stay open


def test_the_last_key_s_revocation_shuts_the_gateway(gateway: tuple[ServerProcess, Path, dict[str, Any]]) -> None:
    process, state_dir, key = gateway
    assert sagemaker(process.url, key).list_models()["Models"] == []
    assert refused(sagemaker(process.url, None).list_models)["Code"] == "MissingAuthenticationTokenException"

    revoked = pier(state_dir, "keys", "revoke", "ops")
    assert revoked.returncode == 0, revoked.stderr
    said = " ".join(revoked.stderr.split())
    assert f"on 0.0.0.0:{process.port} now REFUSES EVERY CALL" in said and "pier keys create" in said
    assert_shut(process.url, key)

    second = create_key(state_dir, "ops2")  # works at once, no restart
    assert sagemaker(process.url, second).list_models()["Models"] == []
    assert models(process.url, second["api_key"]) == []

    (state_dir / "keys.json").unlink()
    assert_shut(process.url, second)

    (state_dir / "keys.json").write_text(json.dumps({"version": 1, "keys": []}))
    assert_shut(process.url, second)

    for damaged in ("", "{}"):  # not a key file at all: refused too (fail closed), as a caller's error
        (state_dir / "keys.json").write_text(damaged)
        for client in (sagemaker(process.url, second), sagemaker(process.url, None)):
            error = refused(client.list_models)
            assert error["Code"] == "UnrecognizedClientException", error
            assert "no usable keys" in error["Message"] and str(state_dir) not in error["Message"]
        with pytest.raises(openai.AuthenticationError) as raised:
            models(process.url, second["api_key"])
        assert "no usable keys" in raised.value.message and str(state_dir) not in raised.value.message
        assert httpx.post(process.url, headers=LIST_MODELS, content=b"{}").status_code == 403
    assert f"{state_dir / 'keys.json'} is not a pier key file" in process.output()  # the path: in the log only


def test_a_signature_for_another_service_or_region_is_refused(
        gateway: tuple[ServerProcess, Path, dict[str, Any]]) -> None:
    process, _, key = gateway
    error = refused(sagemaker(process.url, key, signing_name="s3").list_models)
    assert error["Code"] == "InvalidSignatureException"
    assert error["Message"].startswith("Credential should be scoped to correct service: 'sagemaker'.")
    error = refused(sagemaker(process.url, key, region="xx-fake-1").list_models)
    assert error["Code"] == "InvalidSignatureException"
    assert error["Message"].startswith("Credential should be scoped to a valid region, not 'xx-fake-1'.")

    signed = {"endpoint_url": process.url, "aws_access_key_id": key["access_key_id"],
              "aws_secret_access_key": key["secret_access_key"], "config": Config(retries={"max_attempts": 1})}
    runtime = boto3.client("sagemaker-runtime", region_name="xx-fake-1", **signed)
    error = refused(lambda: runtime.invoke_endpoint(EndpointName="any", Body=b"{}"))
    assert (error["Code"], "valid region" in error["Message"]) == ("InvalidSignatureException", True)
    scaling = boto3.client("application-autoscaling", region_name="eu-west-1", **signed)
    assert scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []
    cloudwatch = boto3.client("cloudwatch", region_name="ap-south-2", **signed)
    assert cloudwatch.list_metrics()["Metrics"] == []
    runtime = boto3.client("sagemaker-runtime", region_name="us-east-1", **signed)
    assert refused(lambda: runtime.invoke_endpoint(EndpointName="any", Body=b"{}"))["Code"] == "ValidationError"


def test_only_pier_s_own_origin_and_the_listed_one_are_trusted(
        gateway: tuple[ServerProcess, Path, dict[str, Any]]) -> None:
    process, _, key = gateway
    bearer = {"Authorization": f"Bearer {key['api_key']}"}

    def status(origin: str) -> int:
        return httpx.get(process.url + "/v1/models", headers={**bearer, "Origin": origin}).status_code

    assert status(process.url) == 200  # a page pier served (the console)
    assert status(LISTED_ORIGIN) == 200  # --allow-origin
    for foreign in ("http://localhost:3001", "http://127.0.0.1:5173", f"http://localhost:{process.port}", "null"):
        assert status(foreign) == 403, foreign
    reply = httpx.get(process.url + "/v1/models", headers={**bearer, "Origin": "http://localhost:5173"})
    assert reply.json()["error"]["code"] == "forbidden_origin"
    assert "--allow-origin http://localhost:5173" in reply.json()["error"]["message"]
