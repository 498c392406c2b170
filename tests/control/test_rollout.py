"""Rolling inference-component updates: the batch planner table-tested, then driven through the real operations,
state and reconciler with a fake backend (copies become ready when the test says) and a clock the test moves."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pier.backends.base import CopyState
from pier.control.api import ControlPlane
from pier.control.capacity import CopyCap
from pier.control.errors import ResourceLimitExceeded
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.reconciler import Reconciler
from pier.control.resource_store import ResourceStore
from pier.control.rollout import COMPLETED, ROLLED_BACK, Roll, RollPolicy, Seen, advance, copies_of, roll_policy
from tests.control.fakes import FakeBackend
from tests.control.test_deployer import Clock
from tests.control.test_reconciler_loop import World

pytestmark = pytest.mark.anyio


def size(kind: str, value: int) -> dict[str, Any]:
    return {"Type": kind, "Value": value}


@pytest.mark.parametrize(("kind", "value", "copies", "expected"), [
    ("COPY_COUNT", 1, 4, 1), ("COPY_COUNT", 9, 4, 4), ("CAPACITY_PERCENT", 25, 4, 1),
    ("CAPACITY_PERCENT", 30, 4, 2), ("CAPACITY_PERCENT", 5, 3, 1), ("CAPACITY_PERCENT", 100, 3, 3),
])
def test_batch_sizes(kind: str, value: int, copies: int, expected: int) -> None:
    assert copies_of(size(kind, value), copies) == expected


def test_rollback_defaults_to_all_copies_at_once() -> None:
    config = {"RollingUpdatePolicy": {"MaximumBatchSize": size("COPY_COUNT", 1), "WaitIntervalInSeconds": 2}}
    assert roll_policy(config, 4) == RollPolicy(1, 4, 2.0, 3600.0 + 4 * 2, ())  # the default timeout: an hour past
    # the batches' own baking


@pytest.mark.parametrize(("copies", "batch", "wait_s", "timeout_s"), [
    (10, 1, 600, 3600 + 10 * 600),  # ten batches baking ten minutes each: not timed out by waiting as told
    (10, 4, 600, 3600 + 3 * 600),
    (3, 5, 60, 3600 + 60),
    (0, 1, 60, 3600 + 60),
])
def test_without_a_timeout_a_rolling_update_is_not_timed_out_by_its_own_waits(
    copies: int, batch: int, wait_s: int, timeout_s: float,
) -> None:
    config = {"RollingUpdatePolicy": {"MaximumBatchSize": size("COPY_COUNT", batch), "WaitIntervalInSeconds": wait_s}}
    assert roll_policy(config, copies).timeout_s == timeout_s


ONE_BY_ONE = RollPolicy(batch=1, rollback_batch=2, wait_s=5, timeout_s=600, alarms=("errors",))


@pytest.mark.parametrize(("roll", "seen", "expected"), [
    (Roll(1, 0), Seen(1, healthy=False), Roll(1, 0)),  # the batch loads
    (Roll(1, 0), Seen(2, healthy=True), Roll(1, 2, baking=True)),  # ready: it bakes
    (Roll(1, 2, baking=True), Seen(6, healthy=True), Roll(1, 2, baking=True)),
    (Roll(1, 2, baking=True), Seen(7, healthy=True), Roll(2, 7)),  # baked: the next batch
    (Roll(4, 9, baking=True), Seen(14, healthy=True), Roll(4, 9, baking=True, outcome=COMPLETED)),
    # back, RollbackMaximumBatchSize at a time, each once the restored old copies are ready
    (Roll(3, 0), Seen(1, healthy=False, problem="Copy ic-2 failed"), Roll(1, 1, rolling_back=True,
                                                                        reason="...")),
    (Roll(2, 0, baking=True), Seen(1, healthy=True, firing=("errors",)), Roll(0, 1, rolling_back=True,
                                                                            reason="...")),
    (Roll(1, 1, rolling_back=True, reason="r"), Seen(2, healthy=False), Roll(1, 1, rolling_back=True, reason="r")),
    (Roll(1, 1, rolling_back=True, reason="r"), Seen(2, healthy=True), Roll(0, 2, rolling_back=True, reason="r")),
    (Roll(0, 2, rolling_back=True, reason="r"), Seen(3, healthy=True),
     Roll(0, 2, rolling_back=True, reason="r", outcome=ROLLED_BACK)),
])
def test_advance(roll: Roll, seen: Seen, expected: Roll) -> None:
    decided = advance(ONE_BY_ONE, 4, roll, 0.0, seen)
    if expected.reason == "...":
        assert decided.reason
        decided = Roll(decided.updated, decided.since, decided.baking, decided.rolling_back, "...", decided.outcome)
    assert decided == expected


def test_a_timeout_rolls_back() -> None:
    decided = advance(ONE_BY_ONE, 4, Roll(1, 0), 0.0, Seen(601, healthy=False))
    assert decided.rolling_back
    assert "MaximumExecutionTimeoutInSeconds (600 s)" in decided.reason


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
                                                           copy_cap=CopyCap(6, "the test's")))
    for name in ("old", "new"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "m.gguf").write_bytes(b"GGUF")
        world.call("CreateModel", ModelName=name, PrimaryContainer={"ModelDataUrl": str(folder)})
    world.call("CreateEndpointConfig", EndpointConfigName="h", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.m5.4xlarge", "InitialInstanceCount": 1}])
    world.call("CreateEndpoint", EndpointName="host", EndpointConfigName="h")
    world.call("CreateInferenceComponent", InferenceComponentName="ic", EndpointName="host",
               Specification=spec("old"), RuntimeConfig={"CopyCount": 4})
    await world.until(lambda: len(backend.copies) == 4)
    backend.ready_all()
    await world.until(lambda: world.component("ic") == ("InService", ""))
    yield world
    await reconciler.close()
    state.close()


def spec(model: str) -> dict[str, Any]:
    return {"ModelName": model, "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1,
                                                               "MinMemoryRequiredInMb": 256}}


def rolling(batch: int = 1, **extra: Any) -> dict[str, Any]:
    return {"RollingUpdatePolicy": {"MaximumBatchSize": size("COPY_COUNT", batch), "WaitIntervalInSeconds": 5,
                                    **extra}}


def models(world: World) -> list[str]:
    return sorted(Path(s.model_dir).name for s in world.backend.specs.values())


async def test_copies_are_replaced_one_batch_at_a_time(world: World, clock: Clock) -> None:
    world.call("UpdateInferenceComponent", InferenceComponentName="ic", Specification=spec("new"),
               DeploymentConfig=rolling())
    history = []
    for _ in range(4):
        await world.until(lambda: len(world.backend.copies) == 5)  # the batch's new copy beside the four
        assert world.component("ic")[0] == "Updating"
        world.backend.ready_all()
        await world.until(lambda: len(world.backend.copies) == 4)  # the copy it replaces drained
        history.append(models(world).count("new"))
        clock.now += 5  # baked
        await world.reconciler.tick()
    await world.until(lambda: world.component("ic") == ("InService", ""))
    assert history == [1, 2, 3, 4]
    assert models(world) == ["new"] * 4
    described = world.call("DescribeInferenceComponent", InferenceComponentName="ic")
    assert described["Specification"]["ModelName"] == "new"


async def test_a_batch_that_fails_rolls_back_to_the_old_specification(world: World, clock: Clock) -> None:
    originals = set(world.backend.copies)
    world.call("UpdateInferenceComponent", InferenceComponentName="ic", Specification=spec("new"),
               DeploymentConfig=rolling(batch=2))
    await world.until(lambda: len(world.backend.copies) == 6)
    new = set(world.backend.copies) - originals
    for copy_id in new:
        world.backend.set_state(copy_id, CopyState.FAILED, "the model failed to load")
    await world.until(lambda: not new & set(world.backend.copies))
    assert set(world.backend.copies) == originals  # the old copies never stopped
    await world.until(lambda: world.component("ic")[0] == "InService")
    _, reason = world.component("ic")
    assert "could not become ready" in reason and "the model failed to load" in reason
    described = world.call("DescribeInferenceComponent", InferenceComponentName="ic")
    assert described["Specification"]["ModelName"] == "old"
    assert models(world) == ["old"] * 4


async def test_a_batch_the_host_cannot_hold_is_refused_whole(world: World) -> None:
    with pytest.raises(ResourceLimitExceeded, match="each batch's 3 new copies beside the old ones"):
        world.call("UpdateInferenceComponent", InferenceComponentName="ic", Specification=spec("new"),
                   DeploymentConfig=rolling(batch=3, RollbackMaximumBatchSize=size("COPY_COUNT", 1)))
    described = world.call("DescribeInferenceComponent", InferenceComponentName="ic")
    assert (described["InferenceComponentStatus"], described["Specification"]["ModelName"]) == ("InService", "old")
