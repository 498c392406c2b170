"""pier for real with keys: `pier keys create`, then `pier serve MODEL` (a gateway process, real copies on a TINY
GGUF, each answering only its gateway) deploys its endpoint with its own session key; the CLI finds the local
admin key; boto3 and openai need theirs; the log holds audit lines and no secret."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import openai
import pytest
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.security.conftest import chat
from tests.server.processes import SRC
from tests.sockets import free_port

pytestmark = pytest.mark.e2e


def pier(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pier", *args], env=env, capture_output=True, text=True, timeout=120)


def test_serve_with_keys_then_call_it_every_way(tmp_path: Path, tiny_gguf: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HOME": str(tmp_path), "PIER_URL": url, "OMP_WAIT_POLICY": "passive",
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
                 "PIER_ACCESS_KEY_ID", "PIER_SECRET_ACCESS_KEY", "API_KEY"):
        env.pop(name, None)
    admin = json.loads(pier("keys", "create", "ops", "--role", "admin", "--json", env=env).stdout)
    app = json.loads(pier("keys", "create", "app", "--role", "invoke", "--endpoint", "tiny", "--json", env=env).stdout)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        serve = subprocess.Popen([sys.executable, "-m", "pier", "serve", str(tiny_gguf), "--name", "tiny", "--port",
                                  str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "Endpoint tiny is InService at" not in log.read_text():
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)

        listed = pier("ls", "--json", env=env)  # signed with the admin key in ~/.pier/keys.json
        assert [(e["name"], e["status"]) for e in json.loads(listed.stdout)] == [("tiny", "InService")], listed

        assert chat(openai.OpenAI(base_url=f"{url}/v1", api_key=app["api_key"]), "tiny").choices
        with pytest.raises(openai.AuthenticationError):
            chat(openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0), "tiny")

        signed = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": app["access_key_id"],
                  "aws_secret_access_key": app["secret_access_key"]}
        body = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 3}})
        reply = boto3.client("sagemaker-runtime", **signed).invoke_endpoint(
            EndpointName="tiny", Body=body, ContentType="application/json")
        assert json.loads(reply["Body"].read())[0]["generated_text"].startswith("the quick brown fox")
        unsigned = boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                                config=Config(signature_version=UNSIGNED, retries={"max_attempts": 1}))
        with pytest.raises(ClientError, match="MissingAuthenticationToken"):
            unsigned.invoke_endpoint(EndpointName="tiny", Body=body, ContentType="application/json")
        with pytest.raises(ClientError, match="AccessDenied"):
            boto3.client("sagemaker", **signed).list_endpoints()
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(60)
    text = log.read_text()
    assert "audit principal=pier-serve operation=sagemaker:CreateModel" in text
    assert "audit principal=app operation=sagemaker:ListEndpoints resource=- outcome=AccessDeniedException" in text
    for secret in (admin["secret_access_key"], admin["api_key"], app["secret_access_key"], app["api_key"]):
        assert secret not in text
    copies_logs = "".join(p.read_text() for p in (tmp_path / ".pier" / "copies").rglob("copy.log"))
    assert "Application startup complete" in copies_logs
    for secret in (admin["secret_access_key"], app["secret_access_key"], app["api_key"]):
        assert secret not in copies_logs
