"""The README's main command for real: `pier serve --demo` brings up a gateway and an endpoint, and the CLI,
the openai client and boto3 all reach it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest
from openai import OpenAI

from tests.server.processes import SRC
from tests.sockets import free_port

pytestmark = pytest.mark.e2e


def pier(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pier", *args], env=env, capture_output=True, text=True, timeout=120)


def test_serve_demo_then_call_it_every_way(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HOME": str(tmp_path), "PIER_URL": url, "OMP_WAIT_POLICY": "passive",
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        serve = subprocess.Popen([sys.executable, "-m", "pier", "serve", "--demo", "--port", str(port),
                                  "--speculate", "3"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "Endpoint demo is InService at" not in log.read_text():
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert "RANDOM weights" in log.read_text() and f"{url}/v1" in log.read_text()

        listed = json.loads(pier("ls", "--json", env=env).stdout)
        assert [(e["name"], e["status"]) for e in listed] == [("demo", "InService")]

        chat = OpenAI(base_url=f"{url}/v1", api_key="unused").chat.completions.create(
            model="demo", messages=[{"role": "user", "content": "hello"}], max_tokens=6)
        assert chat.choices[0].message.content and chat.usage.completion_tokens == 6
        response = OpenAI(base_url=f"{url}/v1", api_key="unused").responses.create(
            model="demo", input="hello", max_output_tokens=6)
        assert response.output_text and response.usage is not None and response.usage.output_tokens == 6

        control = boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                               aws_secret_access_key="x")
        [model] = control.list_models()["Models"]
        environment = control.describe_model(ModelName=model["ModelName"])["PrimaryContainer"]["Environment"]
        assert environment["SPECULATE"] == "3"  # --speculate, for the copy

        runtime = boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1",
                               aws_access_key_id="x", aws_secret_access_key="x")
        body = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 5}})
        reply = json.loads(runtime.invoke_endpoint(EndpointName="demo", Body=body,
                                                   ContentType="application/json")["Body"].read())
        assert reply[0]["generated_text"].startswith("the quick brown fox")

        invoked = pier("invoke", "demo", "--prompt", "hello", "--max-new-tokens", "3", env=env)
        assert invoked.returncode == 0 and "generated_text" in invoked.stdout

        deleted = pier("delete", "demo", env=env)
        assert deleted.returncode == 0, deleted.stderr
        assert json.loads(pier("ls", "--json", env=env).stdout) == []
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(60)
