"""A gateway that serves HTTPS (`pier up --tls-cert --tls-key`, a certificate from a test CA) with one copy of a
TINY GGUF, reached by every client that verifies it: boto3 (verify=CA), the openai client (httpx with the CA),
the `pier` CLI (--ca-bundle, AWS_CA_BUNDLE, SSL_CERT_FILE) and `pier bench`. Without the CA each refuses the
connection, and the CLI says how to trust it. The copy behind it answers only the gateway, /metrics included."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import httpx
import openai
import pytest

from pier.security.client_trust import CA_BUNDLE_VARIABLES, ssl_context
from tests.certificates import Certificates, issue
from tests.e2e.gateway_process import HttpsGatewayProcess
from tests.server.processes import pier_environment
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

ENDPOINT = "tls-tiny"
IN_SERVICE = {"Delay": 1, "MaxAttempts": 120}
GENERATE = json.dumps({"inputs": "the cat", "parameters": {"max_new_tokens": 2}})


@dataclass(frozen=True)
class Https:
    url: str
    certificates: Certificates
    folder: Path

    def client(self, service: str, verify: str | bool | None = None) -> Any:
        return boto3.client(service, endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="x",
                            aws_secret_access_key="x",
                            verify=str(self.certificates.ca) if verify is None else verify)


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Https]:
    folder = tmp_path_factory.mktemp("https-gateway")
    certificates = issue(folder / "tls")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    with HttpsGatewayProcess(folder / "state", free_port(), folder / "gateway.log", certificates) as process:
        process.wait_ready()
        assert f"pier gateway on {process.url}" in process.output()
        served = Https(process.url, certificates, folder)
        _deploy(served, folder / "model")
        yield served


def _deploy(gateway: Https, model_dir: Path) -> None:
    sagemaker = gateway.client("sagemaker")
    sagemaker.create_model(ModelName=ENDPOINT, ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"Image": "pier", "ModelDataUrl": f"file://{model_dir}"})
    sagemaker.create_endpoint_config(EndpointConfigName=ENDPOINT, ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": ENDPOINT, "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=ENDPOINT)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=IN_SERVICE)


def pier(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The `pier` command as a user runs it, with no CA bundle in its environment unless `env` sets one."""
    environment = pier_environment(**env)
    for name in CA_BUNDLE_VARIABLES:
        if name not in env:
            environment.pop(name, None)
    return subprocess.run([sys.executable, "-m", "pier", *args], env=environment, capture_output=True, text=True,
                          timeout=300)


def test_boto3_verifies_the_gateway_with_the_test_ca(gateway: Https) -> None:
    listed = gateway.client("sagemaker").list_endpoints()["Endpoints"]
    assert [e["EndpointName"] for e in listed] == [ENDPOINT]
    reply = gateway.client("sagemaker-runtime").invoke_endpoint(EndpointName=ENDPOINT, Body=GENERATE,
                                                                ContentType="application/json")
    assert json.loads(reply["Body"].read())[0]["generated_text"].startswith("the cat")
    untrusting = gateway.client("sagemaker", verify=True)  # certifi's public CAs only
    with pytest.raises(botocore.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusting.list_endpoints()


def test_the_openai_client_verifies_the_gateway_with_the_test_ca(gateway: Https,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    with httpx.Client(verify=ssl_context(gateway.certificates.ca)) as http:
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", http_client=http, max_retries=0)
        assert [m.id for m in client.models.list()] == [ENDPOINT]
        answer = client.chat.completions.create(model=ENDPOINT, max_tokens=3,
                                                messages=[{"role": "user", "content": "hello"}])
        assert answer.usage is not None and answer.usage.completion_tokens == 3
    for name in CA_BUNDLE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused", max_retries=0).models.list()
    monkeypatch.setenv("SSL_CERT_FILE", str(gateway.certificates.ca))  # httpx's own variable, as docs/security.md says
    assert [m.id for m in openai.OpenAI(base_url=gateway.url + "/v1", api_key="unused").models.list()] == [ENDPOINT]


@pytest.mark.parametrize("trust", ["--ca-bundle", "AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"])
def test_the_cli_trusts_a_private_ca_the_ecosystems_ways(gateway: Https, trust: str) -> None:
    ca = str(gateway.certificates.ca)
    option, env = ([trust, ca], {}) if trust.startswith("--") else ([], {trust: ca})
    listed = pier("ls", "--json", "--url", gateway.url, *option, **env)
    assert listed.returncode == 0, listed.stderr
    assert [(e["name"], e["status"]) for e in json.loads(listed.stdout)] == [(ENDPOINT, "InService")]


def test_the_cli_invokes_chats_and_reads_logs_over_https(gateway: Https) -> None:
    ca = str(gateway.certificates.ca)
    invoked = pier("invoke", ENDPOINT, "--prompt", "hello", "--max-new-tokens", "2", "--url", gateway.url,
                   "--ca-bundle", ca)
    assert invoked.returncode == 0 and "generated_text" in invoked.stdout, invoked.stderr
    chat = subprocess.run([sys.executable, "-m", "pier", "chat", ENDPOINT, "--max-tokens", "3", "--url", gateway.url],
                          input="hello\nexit\n", env=pier_environment(AWS_CA_BUNDLE=ca), capture_output=True,
                          text=True, timeout=120)
    assert chat.returncode == 0 and f"{ENDPOINT}>" in chat.stderr, chat.stderr  # SigV4 over httpx: /v1 chat
    logs = pier("logs", ENDPOINT, "--url", gateway.url, SSL_CERT_FILE=ca)  # httpx: /pier/copies and their logs
    assert logs.returncode == 0 and "starting copy" in logs.stdout, logs.stderr


def test_without_the_ca_the_cli_says_how_to_trust_it(gateway: Https) -> None:
    refused = pier("ls", "--url", gateway.url)
    assert refused.returncode == 1
    assert "presents a certificate this machine does not trust" in refused.stderr
    assert "--ca-bundle FILE" in refused.stderr and "AWS_CA_BUNDLE" in refused.stderr
    plain = pier("ls", "--url", gateway.url.replace("https://", "http://"))
    assert plain.returncode == 1 and "use https://" in plain.stderr


def test_pier_bench_measures_the_gateway_over_https(gateway: Https) -> None:
    out = gateway.folder / "bench"
    common = ["bench", ENDPOINT, "--gateway", gateway.url, "--concurrency", "1", "--requests", "2",
              "--input-len", "8", "--output-len", "2", "--warmup", "0", "--no-progress"]
    measured = pier(*common, "--ca-bundle", str(gateway.certificates.ca), "--out", str(out))
    assert measured.returncode == 0, measured.stderr
    (run,) = json.loads((out / "summary.json").read_text())["runs"]
    assert run["results_num_completed_requests"] == 2 and run["results_number_errors"] == 0
    untrusting = pier(*common)
    assert untrusting.returncode == 2  # refused before any traffic, as options that cannot work are
    assert "does not trust" in untrusting.stderr and "--ca-bundle" in untrusting.stderr


def test_the_copy_answers_only_its_gateway_metrics_included(gateway: Https) -> None:
    verify = ssl_context(gateway.certificates.ca)
    (copy,) = httpx.get(gateway.url + "/pier/copies", verify=verify).json()["copies"]
    assert copy["url"].startswith("http://127.0.0.1:")  # on loopback, behind the gateway
    for path in ("/metrics", "/v1/models", "/info"):
        refused = httpx.get(copy["url"] + path)
        assert refused.status_code == 403, path
    assert httpx.get(copy["url"] + "/ping").status_code == 200  # the supervisor's health check stays open
    scraped = httpx.get(gateway.url + "/metrics", verify=verify).text  # the gateway sends the copy's secret
    assert f'copy="{copy["copy_id"]}"' in scraped and "pier_http_requests_total" in scraped
