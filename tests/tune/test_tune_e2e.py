"""`pier tune` end to end on a tiny model: real copies on its own gateway, short pier bench runs, the table and
plot, the winner's deploy file deployed with `pier deploy` on another gateway and served through boto3; then a
resumed run that finds every trial in its state file and runs none again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from tests.e2e.gateway_process import GatewayProcess
from tests.server.processes import SRC
from tests.sockets import free_port

pytestmark = pytest.mark.e2e


def pier(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pier", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_tune_writes_a_deploy_file_that_deploys_and_serves(tmp_path: Path, tiny_gguf: Path) -> None:
    env = {**os.environ, "OMP_WAIT_POLICY": "passive", "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        env.pop(name, None)
    out = tmp_path / "tune"
    args = ("tune", str(tiny_gguf), "--slo", "ttft_p90<30s,tpot_p90<5s", "--parallel", "2,4", "--kv-types", "f16",
            "--requests", "4", "--input-len", "16", "--output-len", "8", "--context", "512", "--memory-mb", "256",
            "--repeats", "1", "--endpoint", "tuned-tiny", "--out", str(out))
    tuned = pier(*args, "--budget", "30s", env=env, timeout=150)
    assert tuned.returncode == 0, tuned.stderr
    assert "pier tune: candidates" in tuned.stderr and "Winner:" in tuned.stderr
    state = json.loads((out / "tune-state.json").read_text())
    assert len(state["trials"]) >= 2 and all(t["throughput"] > 0 for t in state["trials"])
    assert (out / "tune.png").stat().st_size > 0
    written = yaml.safe_load((out / "deploy.yaml").read_text())
    component = written["components"][0]
    assert written["endpoint"] == "tuned-tiny" and component["model"]["data"] == str(tiny_gguf)
    assert component["model"]["environment"]["PIER_PARALLEL"] in {"2", "4"}

    resumed = pier(*args, "--budget", "1s", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(state['trials'])} trials" in resumed.stderr
    assert len(json.loads((out / "tune-state.json").read_text())["trials"]) == len(state["trials"])

    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log").wait_ready() as gateway:
        deployed = pier("deploy", str(out / "deploy.yaml"), "--url", gateway.url, env=env)
        assert deployed.returncode == 0, deployed.stderr
        runtime = boto3.client("sagemaker-runtime", endpoint_url=gateway.url, region_name="us-east-1",
                               aws_access_key_id="x", aws_secret_access_key="x")
        body = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 4}})
        reply = json.loads(runtime.invoke_endpoint(
            EndpointName="tuned-tiny", InferenceComponentName="tuned-tiny-copy", Body=body,
            ContentType="application/json")["Body"].read())
        assert reply[0]["generated_text"].startswith("the quick brown fox")
