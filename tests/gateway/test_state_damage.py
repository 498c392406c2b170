"""What a damaged state does to the gateway: a truncated or garbage file stops `pier up` with the file's name and
the fix (and `pier state restore` fixes it); one bad row makes only its resource unreadable, through boto3."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.control import backups
from pier.control.resource_store import STATE_FILE
from pier.gateway.app import create_gateway
from tests.control.fakes import FakeBackend
from tests.gateway.served import Served, sagemaker, sagemaker_client, served, wait_for
from tests.server.processes import pier_environment
from tests.sockets import free_port, serving


def _deploy(sagemaker: Any, model_dir: Path, name: str) -> None:
    sagemaker.create_model(ModelName=name, PrimaryContainer={"ModelDataUrl": str(model_dir)})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "m.gguf").write_bytes(b"GGUF")
    return folder


@pytest.fixture
def saved(tmp_path: Path, model_dir: Path) -> Path:
    """A state folder a gateway served two endpoints from, backed up on its way out."""
    state_dir = tmp_path / "state"
    with serving(create_gateway(state_dir, backend=FakeBackend(), tick_s=0.05), lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        for name in ("first", "second"):
            _deploy(sagemaker, model_dir, name)
    assert backups.list_backups(state_dir)
    return state_dir


def pier_up(state_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from pier.cli import app; app()", "up", "--state-dir", str(state_dir),
         "--port", str(free_port())],
        env=pier_environment(), capture_output=True, text=True, timeout=60)


Damage = Callable[[bytes], bytes]
__all__ = ["sagemaker", "served"]  # fixtures


@pytest.mark.parametrize("damage", [
    pytest.param(lambda data: data[: len(data) // 3], id="truncated"),
    pytest.param(lambda data: b"\x17garbage\x00" * (len(data) // 9), id="garbage"),
])
def test_a_damaged_state_stops_pier_up_and_pier_state_restore_mends_it(saved: Path, damage: Damage) -> None:
    path = saved / STATE_FILE
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)
    refused = pier_up(saved)
    assert refused.returncode == 3, refused.stderr
    assert f"pier cannot use its state file {path}" in refused.stderr
    assert f"pier state restore --state-dir {saved}" in refused.stderr
    assert f"mv {path} {path}.damaged" in refused.stderr
    assert "pier state check" in refused.stderr
    assert path.read_bytes() == damaged  # never replaced by an empty one

    runner = CliRunner()
    checked = runner.invoke(app, ["state", "check", "--state-dir", str(saved)])
    assert checked.exit_code == 1 and "damaged:" in checked.output
    restored = runner.invoke(app, ["state", "restore", "--state-dir", str(saved)])
    assert restored.exit_code == 0, restored.output
    assert "Restored" in restored.output and "moved aside" in restored.output
    assert runner.invoke(app, ["state", "check", "--state-dir", str(saved)]).exit_code == 0

    with serving(create_gateway(saved, backend=FakeBackend(), tick_s=0.05), lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        names = {e["EndpointName"]: e["EndpointStatus"] for e in sagemaker.list_endpoints()["Endpoints"]}
        assert names == {"first": "InService", "second": "InService"}


def _break(state_dir: Path, table: str, name: str, body: str = '{"name": "damaged by hand"}') -> None:
    with sqlite3.connect(state_dir / STATE_FILE) as db:
        db.execute(f"UPDATE {table} SET body = ? WHERE name = ?", (body, name))


def test_one_bad_row_makes_only_its_endpoint_unreadable(served: Served, sagemaker: Any, model_dir: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    for name in ("good", "bad"):
        _deploy(sagemaker, model_dir, name)
    copies = dict(served.backend.copies)
    _break(served.state_dir, "endpoints", "bad")
    _break(served.state_dir, "models", "bad", "not json")

    described = served.call("DescribeEndpoint", {"EndpointName": "bad"})  # checked against botocore's shape
    assert described["EndpointStatus"] == "Failed"
    assert "pier cannot read its stored record of this endpoint" in described["FailureReason"]
    listed = served.call("ListEndpoints", {})["Endpoints"]
    assert {e["EndpointName"]: e["EndpointStatus"] for e in listed} == {"good": "InService", "bad": "Failed"}
    assert [e["FailureReason"] for e in listed if e["EndpointName"] == "bad"]
    error = served.call("DescribeModel", {"ModelName": "bad"}, expect=400)
    assert error["__type"] == "ValidationException" and "cannot read its stored record" in error["message"]
    assert [m["ModelName"] for m in sagemaker.list_models()["Models"]] == ["bad", "good"]

    wait_for(lambda: "skipping endpoint bad" in caplog.text)
    assert served.backend.copies == copies  # the reconciler leaves what it cannot read alone
    assert sagemaker.describe_endpoint(EndpointName="good")["EndpointStatus"] == "InService"
    sagemaker.update_endpoint_weights_and_capacities(EndpointName="good", DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredInstanceCount": 2}])
    wait_for(lambda: sum(1 for c in served.backend.copies if c.startswith("good")) == 2)

    sagemaker.delete_endpoint(EndpointName="bad")  # the way out: delete it, and make it again
    sagemaker.delete_model(ModelName="bad")
    sagemaker.delete_endpoint_config(EndpointConfigName="bad")
    wait_for(lambda: not any(c.startswith("bad") for c in served.backend.copies))
    assert [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]] == ["good"]
    _deploy(sagemaker, model_dir, "bad")


def test_one_bad_component_row(served: Served, sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    sagemaker.create_endpoint_config(EndpointConfigName="host", ProductionVariants=[
        {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="host", EndpointConfigName="host")
    for name in ("ok", "broken"):
        sagemaker.create_inference_component(
            InferenceComponentName=name, EndpointName="host", VariantName="AllTraffic",
            Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}},
            RuntimeConfig={"CopyCount": 1})
    wait_for(lambda: all(sagemaker.describe_inference_component(InferenceComponentName=name)[
        "InferenceComponentStatus"] == "InService" for name in ("ok", "broken")))  # the reconciler is done with it
    _break(served.state_dir, "inference_components", "broken",
           '{"name": "broken", "endpoint": "host", "variant": "AllTraffic", "copies": "many"}')
    described = served.call("DescribeInferenceComponent", {"InferenceComponentName": "broken"})
    assert (described["InferenceComponentStatus"], described["EndpointName"]) == ("Failed", "host")
    listed = sagemaker.list_inference_components(EndpointNameEquals="host", StatusEquals="Failed")
    assert [c["InferenceComponentName"] for c in listed["InferenceComponents"]] == ["broken"]
    sagemaker.update_inference_component_runtime_config(InferenceComponentName="ok",
                                                        DesiredRuntimeConfig={"CopyCount": 2})
    wait_for(lambda: sum(1 for c in served.backend.copies if c.startswith("ok")) == 2)
    assert any(c.startswith("broken") for c in served.backend.copies)
    sagemaker.delete_inference_component(InferenceComponentName="broken")
    wait_for(lambda: not any(c.startswith("broken") for c in served.backend.copies))


def test_invoking_an_unreadable_endpoint_says_why(served: Served, sagemaker: Any, model_dir: Path) -> None:
    _deploy(sagemaker, model_dir, "bad")
    _break(served.state_dir, "endpoints", "bad")
    invoked = httpx.post(f"{served.url}/endpoints/bad/invocations", json={"inputs": "hi"})
    assert invoked.status_code == 400 and "cannot read its stored record" in invoked.json()["message"]
