"""A host whose fastest CPU kernels crash, as a user meets it through boto3 (drilled with PIER_KERNEL_PROBE_FAULTS:
the probe's child really dies of SIGSEGV): the copy serves with the next family and says so on /pier/copies and in
`pier describe`; where every family crashes, the endpoint fails at once naming the signal, with no restarts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from pier.engine.kernel_probe import FAULTS
from pier.engine.kernels import read_host
from pier.engine.llama import system_info
from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

HOST = read_host(system_info())
FIRST, SECOND = HOST.families()[0], HOST.families()[1] if len(HOST.families()) > 1 else None


def deploy(url: str, model: Path, environment: dict[str, str]) -> tuple[Any, Any]:
    settings = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x",
                "aws_secret_access_key": "x"}
    sagemaker, runtime = boto3.client("sagemaker", **settings), boto3.client("sagemaker-runtime", **settings)
    sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"ModelDataUrl": f"file://{model}", "Environment": environment})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
    return sagemaker, runtime


@pytest.mark.skipif(SECOND is None, reason="this build of llama.cpp offers one kernel family only (no repack)")
def test_a_crashing_family_is_left_for_the_next_and_said(small_gguf: Path, tmp_path: Path) -> None:
    assert SECOND is not None
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log") as gateway:
        sagemaker, runtime = deploy(gateway.wait_ready().url, small_gguf, {
            FAULTS: f"{FIRST.value}:crash", "PIER_CACHE_DIR": str(tmp_path / "cache")})
        until(lambda: sagemaker.describe_endpoint(EndpointName="e")["EndpointStatus"] == "InService",
              timeout=120, what="the endpoint to serve")
        for _ in range(3):
            answer = runtime.invoke_endpoint(EndpointName="e", ContentType="application/json", Body=json.dumps(
                {"inputs": "the cat", "parameters": {"max_new_tokens": 4}}))
            assert answer["ResponseMetadata"]["HTTPStatusCode"] == 200
        said = f"{HOST.name(FIRST)} crash on this host (SIGSEGV); using {HOST.name(SECOND)}"
        copy = httpx.get(f"{gateway.url}/pier/copies").json()["copies"][0]
        assert copy["kernels"] == said and copy["restarts"] == 0
        described = subprocess.run([sys.executable, "-m", "pier", "describe", "e", "--url", gateway.url],
                                   capture_output=True, text=True, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
                                   timeout=60)
        assert "crash on this host (SIGSEGV)" in described.stdout + described.stderr
        log = httpx.get(f"{gateway.url}/pier/copies/{copy['copy_id']}/logs").text
        assert log.count(f"kernels: {said}") == 1


def test_where_every_family_crashes_the_endpoint_fails_at_once_naming_the_signal(
        small_gguf: Path, tmp_path: Path) -> None:
    drill = ",".join(f"{family.value}:crash" for family in HOST.families())
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log") as gateway:
        started = time.monotonic()
        sagemaker, _ = deploy(gateway.wait_ready().url, small_gguf, {
            FAULTS: drill, "PIER_CACHE_DIR": str(tmp_path / "cache")})
        described = until(lambda: (d := sagemaker.describe_endpoint(EndpointName="e"))["EndpointStatus"] == "Failed"
                          and d, timeout=90, what="the endpoint to fail")
        assert time.monotonic() - started < 60
        reason = described["FailureReason"]
        assert "cannot run on this host" in reason and "crash on this host (SIGSEGV)" in reason, reason
        assert "pier tried" in reason
        copies = httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
        assert all(c["restarts"] == 0 for c in copies), copies
