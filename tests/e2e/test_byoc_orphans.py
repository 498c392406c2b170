"""A `pier up` killed with SIGKILL while a bring-your-own-code worker is busy in predict_fn leaves no process
behind: the copy dies with the gateway, and the worker with the copy."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

import boto3
import httpx
import pytest

from tests.backends.conftest import alive
from tests.e2e.gateway_process import GatewayProcess
from tests.server.byoc.test_pool import make_model
from tests.server.byoc.test_worker_death import BUSY
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e


def test_a_gateway_killed_with_a_busy_handler_worker_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    model = make_model(tmp_path, BUSY)
    gateway = GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log")
    pids: list[int] = []
    try:
        gateway.wait_ready()
        control = boto3.client("sagemaker", endpoint_url=gateway.url, region_name="us-east-1",
                               aws_access_key_id="x", aws_secret_access_key="x")
        control.create_model(ModelName="busy", ExecutionRoleArn="arn:aws:iam::1:role/r", PrimaryContainer={
            "Image": "byoc", "ModelDataUrl": f"file://{model}", "Environment": {"PIER_TEST_PID_FILE": str(pid_file)}})
        control.create_endpoint_config(EndpointConfigName="busy", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "busy", "InstanceType": "local", "InitialInstanceCount": 1}])
        control.create_endpoint(EndpointName="busy", EndpointConfigName="busy")
        control.get_waiter("endpoint_in_service").wait(EndpointName="busy", WaiterConfig={"Delay": 1,
                                                                                            "MaxAttempts": 120})
        pids = [c["pid"] for c in httpx.get(gateway.url + "/pier/copies").json()["copies"] if c["pid"]]

        def invoke() -> None:
            with contextlib.suppress(httpx.HTTPError):  # the gateway is killed under it
                httpx.post(gateway.url + "/endpoints/busy/invocations", json={"x": 1}, timeout=60)

        threading.Thread(target=invoke, daemon=True).start()
        pids.append(int(until(lambda: pid_file.exists() and pid_file.read_text(), 60, "the worker busy")))
        assert all(alive(pid) for pid in pids) and len(pids) == 2  # a copy and its busy worker

        gateway.process.send_signal(signal.SIGKILL)
        gateway.process.wait(10)
        until(lambda: not any(alive(pid) for pid in pids), 15, "the copy and its worker gone")
    finally:
        gateway.stop(10)
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
