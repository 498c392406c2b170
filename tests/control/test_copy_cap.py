"""A host never starts more copies than it holds: the cap's default, `desired_copies` keeping to it (running copies
and older workloads first), ResourceLimitExceeded when a request asks for too many, Failed with why otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.control.api import ControlPlane
from pier.control.capacity import CopyCap, default_copy_cap, host_copy_cap
from pier.control.desired import desired_copies
from pier.control.errors import ResourceLimitExceeded
from pier.control.instance_types import lookup
from pier.control.records import ComponentRecord, EndpointRecord, VariantRecord
from pier.control.resource_store import ResourceStore
from pier.control.shapes import ComponentSpec, ContainerSpec
from pier.control.workload import Workload
from pier.errors import PierError

CAP = CopyCap(3, "PIER_MAX_COPIES_PER_HOST=3")
HOST = (0, 1, 2, 3)


@pytest.mark.parametrize(("cores", "memory_mb", "cap"), [
    (2, 8192, 8),  # 4 per core
    (16, 4096, 16),  # one per 256 MiB
    (1, 100, 1),  # never none
])
def test_the_default_comes_from_cores_and_memory(cores: int, memory_mb: int, cap: int) -> None:
    assert default_copy_cap(cores, memory_mb) == cap


def test_the_setting_wins_and_is_checked() -> None:
    assert host_copy_cap({"PIER_MAX_COPIES_PER_HOST": "7"}) == CopyCap(7, "PIER_MAX_COPIES_PER_HOST=7")
    assert "cores" in host_copy_cap({}).source
    with pytest.raises(PierError, match="PIER_MAX_COPIES_PER_HOST='0' is not a whole number"):
        host_copy_cap({"PIER_MAX_COPIES_PER_HOST": "0"})


def host(name: str = "host") -> EndpointRecord:
    return EndpointRecord(name=name, arn="a", created=1.0, modified=1.0, config_name="c", status="InService",
                          variants=(VariantRecord(name="v", instance_type="local", instance_count=1),))


def component(name: str, copies: int, created: float, weights_mb: int | None = 0) -> ComponentRecord:
    spec = ComponentSpec.model_validate({"ModelName": "m", "ComputeResourceRequirements": {
        "MinMemoryRequiredInMb": 128}})
    return ComponentRecord(name=name, arn="a", created=created, modified=created, endpoint="host", variant="v",
                           specification=spec, container=ContainerSpec(), copies=copies, model_dir="/nowhere",
                           weights_mb=weights_mb)


def test_desired_copies_keep_to_the_cap_older_workloads_first() -> None:
    components = [component("old", 2, 1.0), component("new", 2, 2.0)]
    desired = desired_copies([host()], components, (), HOST, lookup, CAP)
    assert sorted(s.component for s in desired.specs) == ["new", "old", "old"]
    assert len(desired.specs) == len(desired.placements) == 3
    assert desired.problems == {Workload("new"): "1 of 2 copies not started: this host runs at most 3 copies "
                                                  "(PIER_MAX_COPIES_PER_HOST=3) and other workloads hold them. Lower "
                                                  "CopyCount or InstanceCount, delete other inference components or "
                                                  "endpoints, or raise the limit."}
    uncapped = desired_copies([host()], components, (), HOST, lookup)
    assert len(uncapped.specs) == 4 and uncapped.problems == {}


def test_running_copies_are_kept_before_new_ones() -> None:
    components = [component("old", 2, 1.0), component("new", 2, 2.0)]
    every = desired_copies([host()], components, (), HOST, lookup)
    running = {s.copy_id for s in every.specs if s.component == "new"}
    desired = desired_copies([host()], components, (), HOST, lookup, CAP, running)
    assert running <= {s.copy_id for s in desired.specs}
    assert Workload("old") in desired.problems


def test_weights_come_from_the_record_not_a_walk() -> None:
    """The reconciler never walks a model folder: the size measured at fetch time is used, and a component whose
    folder has not been measured yet waits like one still being fetched."""
    measured = desired_copies([host()], [component("c", 1, 1.0, weights_mb=4096)], (), HOST, lookup)
    assert len(measured.specs) == 1  # /nowhere is never looked at
    unmeasured = desired_copies([host()], [component("c", 1, 1.0, weights_mb=None)], (), HOST, lookup)
    assert unmeasured.specs == ()


# ---- at create time


@pytest.fixture
def control(tmp_path: Path) -> ControlPlane:
    model = tmp_path / "model"
    model.mkdir()
    plane = ControlPlane(ResourceStore.open(tmp_path / "state"), copies=lambda workload: [], copy_cap=CAP)
    plane.call("CreateModel", {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": str(model)}}, "us-east-1")
    plane.call("CreateEndpointConfig", {"EndpointConfigName": "host", "ProductionVariants": [
        {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 1}]}, "us-east-1")
    plane.call("CreateEndpoint", {"EndpointName": "host", "EndpointConfigName": "host"}, "us-east-1")
    plane.call("CreateEndpointConfig", {"EndpointConfigName": "classic", "ProductionVariants": [
        {"VariantName": "v", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 2}]}, "us-east-1")
    return plane


def call(plane: ControlPlane, operation: str, **body: Any) -> dict[str, Any]:
    return plane.call(operation, body, "us-east-1")


def create_component(plane: ControlPlane, name: str, copies: int) -> dict[str, Any]:
    return call(plane, "CreateInferenceComponent", InferenceComponentName=name, EndpointName="host", Specification={
        "ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}},
        RuntimeConfig={"CopyCount": copies})


def test_asking_for_more_copies_than_the_host_holds_is_refused_at_once(control: ControlPlane) -> None:
    create_component(control, "a", 2)
    with pytest.raises(ResourceLimitExceeded) as raised:
        create_component(control, "b", 2)
    assert raised.value.message.startswith(
        "The host-level limit 'copies per host' is 3 copies (PIER_MAX_COPIES_PER_HOST=3), with current utilization "
        "of 2 copies and a request delta of 2 copies.")
    assert control.state.components.get("b") is None
    create_component(control, "b", 1)
    for name in ("a", "b"):  # as the reconciler leaves them once their copies are ready
        control.state.components.put(control.state.components.get(name).model_copy(update={"status": "InService"}))
    with pytest.raises(ResourceLimitExceeded):
        call(control, "UpdateInferenceComponentRuntimeConfig", InferenceComponentName="a",
             DesiredRuntimeConfig={"CopyCount": 3})
    with pytest.raises(ResourceLimitExceeded):
        call(control, "UpdateInferenceComponent", InferenceComponentName="b", RuntimeConfig={"CopyCount": 2})
    with pytest.raises(ResourceLimitExceeded, match="request delta of 2 copies"):
        call(control, "CreateEndpoint", EndpointName="classic", EndpointConfigName="classic")
    call(control, "UpdateInferenceComponentRuntimeConfig", InferenceComponentName="a",
         DesiredRuntimeConfig={"CopyCount": 0})  # scaling down is never refused
    call(control, "CreateEndpoint", EndpointName="classic", EndpointConfigName="classic")


def test_failed_copies_hold_none_of_the_cap() -> None:
    components = [component("old", 2, 1.0), component("new", 2, 2.0)]
    every = desired_copies([host()], components, (), HOST, lookup)
    failed = {s.copy_id for s in every.specs if s.component == "old"}
    desired = desired_copies([host()], components, (), HOST, lookup, CAP, failed=failed)
    assert sorted(s.component for s in desired.specs) == ["new", "new", "old", "old"]  # the failed stay wanted
    assert desired.problems == {}
