"""Blue/green endpoint updates through the real operations, state and reconciler, with a fake backend whose copies
change state when the test says so and a clock the test moves: the new fleet beside the old, traffic moved by the
DeploymentConfig's steps (as the gateway's Targets splits it), and every way an update rolls back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pier.backends.base import CopyState
from pier.control.api import ControlPlane
from pier.control.capacity import CopyCap
from pier.control.errors import ResourceLimitExceeded, ValidationError
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.reconciler import Reconciler
from pier.control.resource_store import ResourceStore
from pier.gateway.targets import Targets
from tests.control.botocore_shapes import output_problems
from tests.control.fakes import FakeBackend
from tests.control.test_reconciler_loop import World

pytestmark = pytest.mark.anyio

CANARY = {"BlueGreenUpdatePolicy": {
    "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 10,
                                    "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50}},
    "TerminationWaitInSeconds": 5},
    "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "errors"}]}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def world(tmp_path: Path, clock: Clock) -> AsyncIterator[World]:
    state = ResourceStore.open(tmp_path / "state")
    backend = FakeBackend(auto_ready=False)
    reconciler = Reconciler(state, backend, Fetches(ModelStore(tmp_path / "cache", console=Console(quiet=True))),
                            host=(0, 1), clock=clock)
    world = World(state, backend, reconciler, ControlPlane(state, copies=reconciler.copies, clock=clock,
                                                           copy_cap=CopyCap(2, "the test's")))
    for name in ("old", "new"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "m.gguf").write_bytes(b"GGUF")
        world.call("CreateModel", ModelName=name, PrimaryContainer={"ModelDataUrl": str(folder)})
        world.call("CreateEndpointConfig", EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "local", "InitialInstanceCount": 1}])
    world.call("CreateEndpoint", EndpointName="e", EndpointConfigName="old")
    await world.until(lambda: len(backend.copies) == 1)
    backend.ready_all()
    await world.until(lambda: world.endpoint("e") == ("InService", ""))
    yield world
    await reconciler.close()
    state.close()


def served_by(world: World, draw: float) -> str:
    """The workload a request drawing `draw` goes to, as the gateway resolves it."""
    return str(Targets(world.state, world.reconciler.copies, draw=lambda: draw).resolve("e", None, None).component)


async def update(world: World, **extra: Any) -> tuple[str, str]:
    """UpdateEndpoint to the `new` config; (old copy, new copy) once the new one is started."""
    [old] = world.backend.copies
    world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="new", **extra)
    await world.until(lambda: len(world.backend.copies) == 2)
    [new] = set(world.backend.copies) - {old}
    return old, new


async def test_a_new_fleet_that_fails_is_torn_down_and_the_old_one_serves_on(world: World) -> None:
    old, new = await update(world)
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert described["EndpointStatus"] == "Updating"
    assert described["EndpointConfigName"] == "old"
    assert described["PendingDeploymentSummary"]["EndpointConfigName"] == "new"
    assert described["PendingDeploymentSummary"]["ProductionVariants"][0]["CurrentWeight"] == 0.0
    assert {served_by(world, d) for d in (0.0, 0.5, 0.99)} == {"e/AllTraffic"}

    world.backend.set_state(new, CopyState.FAILED, "gave up: bad magic")
    await world.until(lambda: new not in world.backend.copies)
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert described["EndpointStatus"] == "InService"
    assert described["EndpointConfigName"] == "old"
    assert "could not become healthy" in described["FailureReason"]
    assert "bad magic" in described["FailureReason"]
    assert "PendingDeploymentSummary" not in described
    assert list(world.backend.copies) == [old]
    assert world.backend.stopped == [new]
    assert served_by(world, 0.0) == "e/AllTraffic"


async def test_a_canary_moves_traffic_in_steps_then_retires_the_old_fleet(world: World, clock: Clock) -> None:
    old, new = await update(world, DeploymentConfig=CANARY)
    assert world.call("DescribeEndpoint", EndpointName="e")["LastDeploymentConfig"] == CANARY
    await world.reconciler.tick()
    assert served_by(world, 0.0) == "e/AllTraffic"  # not healthy yet: no traffic
    world.backend.set_state(new, CopyState.READY)
    await world.reconciler.tick()
    assert (served_by(world, 0.3), served_by(world, 0.7)) == ("e/AllTraffic@1", "e/AllTraffic")
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert output_problems("DescribeEndpoint", described) == []
    assert described["PendingDeploymentSummary"]["ProductionVariants"][0]["CurrentWeight"] == 0.5
    assert described["ProductionVariants"][0]["CurrentWeight"] == 0.5  # the old fleet's half

    clock.now += 10  # the canary baked
    await world.reconciler.tick()
    assert served_by(world, 0.99) == "e/AllTraffic@1"
    assert world.call("DescribeEndpoint", EndpointName="e")["EndpointStatus"] == "Updating"  # termination wait
    assert old in world.backend.copies

    clock.now += 10  # baked at all traffic: the termination wait begins
    await world.reconciler.tick()
    assert old in world.backend.copies
    clock.now += 5
    await world.until(lambda: old not in world.backend.copies)
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "new")
    assert "FailureReason" not in described
    assert list(world.backend.copies) == [new]  # the new fleet's copy is kept as it is, not restarted
    assert served_by(world, 0.5) == "e/AllTraffic@1"


async def test_an_alarm_during_baking_rolls_back(world: World, clock: Clock) -> None:
    alarms = {"errors": "OK"}
    world.reconciler.deployer.alarm_state = alarms.get
    old, new = await update(world, DeploymentConfig=CANARY)
    world.backend.set_state(new, CopyState.READY)
    await world.reconciler.tick()
    assert served_by(world, 0.3) == "e/AllTraffic@1"
    alarms["errors"] = "ALARM"
    await world.until(lambda: new not in world.backend.copies)
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "old")
    assert "errors went into ALARM while the new fleet took 50%" in described["FailureReason"]
    assert output_problems("DescribeEndpoint", described) == []
    assert served_by(world, 0.3) == "e/AllTraffic"
    assert list(world.backend.copies) == [old]


async def test_an_update_the_host_cannot_hold_beside_the_old_fleet_is_refused_whole(world: World) -> None:
    world.call("CreateEndpointConfig", EndpointConfigName="big", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "new", "InstanceType": "local", "InitialInstanceCount": 2}])
    with pytest.raises(ResourceLimitExceeded, match="beside the 1 now serving"):
        world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="big")
    described = world.call("DescribeEndpoint", EndpointName="e")
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "old")
    assert "PendingDeploymentSummary" not in described


async def test_retain_deployment_config_reuses_the_last_one(world: World, clock: Clock) -> None:
    with pytest.raises(ValidationError, match="needs CanarySize"):
        world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="new", DeploymentConfig={
            "BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 1}}})
    _, new = await update(world, DeploymentConfig=CANARY)
    world.backend.set_state(new, CopyState.READY)
    for _ in range(4):  # healthy, canary baked, all traffic baked, old fleet's termination wait
        clock.now += 100
        await world.reconciler.tick()
    assert world.endpoint("e") == ("InService", "")
    world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="old", RetainDeploymentConfig=True)
    assert world.call("DescribeEndpoint", EndpointName="e")["LastDeploymentConfig"] == CANARY


async def test_botocores_limits_hold_for_a_deployment_config(world: World) -> None:
    with pytest.raises(ValidationError, match=r"(?i)maximumExecutionTimeoutInSeconds"):
        world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="new", DeploymentConfig={
            "BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE",
                                                                      "WaitIntervalInSeconds": 0},
                                      "MaximumExecutionTimeoutInSeconds": 5}})
    assert world.endpoint("e") == ("InService", "")


async def test_a_failed_endpoint_whose_update_rolls_back_stays_failed(world: World) -> None:
    world.call("CreateEndpoint", EndpointName="f", EndpointConfigName="old")
    await world.until(lambda: len(world.backend.copies) == 2)
    [old] = [c for c in world.backend.copies if c.startswith("f--")]
    world.backend.set_state(old, CopyState.FAILED, "out of memory")
    await world.until(lambda: world.endpoint("f")[0] == "Failed")
    world.call("UpdateEndpoint", EndpointName="f", EndpointConfigName="new")
    await world.until(lambda: len(world.backend.copies) == 3)
    [new] = [c for c in world.backend.copies if c.startswith("f--AllTraffic@")]
    world.backend.set_state(new, CopyState.FAILED, "bad magic")
    await world.until(lambda: world.endpoint("f")[0] != "Updating")
    status, reason = world.endpoint("f")
    assert status == "Failed"
    assert "bad magic" in reason


async def test_a_pending_shadow_variant_is_listed_as_a_shadow_not_as_production(world: World) -> None:
    """PendingDeploymentSummary has its own ShadowProductionVariants (botocore's shape), as DescribeEndpoint has:
    a shadow listed among ProductionVariants reads as a variant that will take clients' traffic."""
    world.control.copy_cap = CopyCap(3, "the test's")
    world.call("CreateEndpointConfig", EndpointConfigName="shadowed", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "new", "InstanceType": "local", "InitialInstanceCount": 1}],
        ShadowProductionVariants=[{"VariantName": "Shadow", "ModelName": "old", "InstanceType": "local",
                                   "InitialInstanceCount": 1}])
    world.call("UpdateEndpoint", EndpointName="e", EndpointConfigName="shadowed")
    pending = world.call("DescribeEndpoint", EndpointName="e")["PendingDeploymentSummary"]
    assert [v["VariantName"] for v in pending["ProductionVariants"]] == ["AllTraffic"]
    assert [v["VariantName"] for v in pending["ShadowProductionVariants"]] == ["Shadow"]
    assert output_problems("DescribeEndpoint", world.call("DescribeEndpoint", EndpointName="e")) == []
