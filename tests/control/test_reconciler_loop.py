"""The reconciler's loop, tick by tick, over the real state, model store and operations, and a fake backend
whose copies change state only when the test says so."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from pier.backends.base import CopyState
from pier.control.api import ControlPlane
from pier.control.capacity import CopyCap
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.reconciler import Reconciler
from pier.control.resource_store import ResourceStore
from tests.control.fakes import FakeBackend

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class World:
    state: ResourceStore
    backend: FakeBackend
    reconciler: Reconciler
    control: ControlPlane

    def call(self, operation: str, **body: Any) -> dict[str, Any]:
        return self.control.call(operation, body, "us-east-1")

    async def until(self, condition: Callable[[], Any], ticks: int = 200) -> None:
        """Tick until `condition` holds (model fetches run on threads, so some ticks find them unfinished)."""
        for _ in range(ticks):
            await self.reconciler.tick()
            await asyncio.sleep(0.01)
            if condition():
                return
        raise AssertionError("condition not reached")

    def endpoint(self, name: str) -> tuple[str, str]:
        described = self.call("DescribeEndpoint", EndpointName=name)
        return described["EndpointStatus"], described.get("FailureReason", "")

    def component(self, name: str) -> tuple[str, str]:
        described = self.call("DescribeInferenceComponent", InferenceComponentName=name)
        return described["InferenceComponentStatus"], described.get("FailureReason", "")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    state = ResourceStore.open(tmp_path / "state")
    backend = FakeBackend(auto_ready=False)
    reconciler = Reconciler(state, backend, Fetches(ModelStore(tmp_path / "cache", console=Console(quiet=True))),
                            host=(0, 1))
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    world = World(state, backend, reconciler, ControlPlane(state, copies=reconciler.copies))
    world.call("CreateModel", ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
    yield world
    await reconciler.close()
    state.close()


def classic(world: World, count: int = 1) -> None:
    world.call("CreateEndpointConfig", EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": count}])
    world.call("CreateEndpoint", EndpointName="e", EndpointConfigName="c")


def hosting(world: World, copies: int = 1, environment: dict[str, str] | None = None) -> None:
    world.call("CreateEndpointConfig", EndpointConfigName="h", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    world.call("CreateEndpoint", EndpointName="host", EndpointConfigName="h")
    world.call("CreateInferenceComponent", InferenceComponentName="ic", EndpointName="host", Specification={
        "ModelName": "m", "Container": {"Environment": environment or {}},
        "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": copies})


async def test_creating_until_every_copy_has_been_ready(world: World) -> None:
    classic(world, count=2)
    await world.until(lambda: len(world.backend.copies) == 2)
    assert world.endpoint("e") == ("Creating", "")
    first = sorted(world.backend.copies)[0]
    world.backend.set_state(first, CopyState.READY)
    await world.reconciler.tick()
    assert world.endpoint("e") == ("Creating", "")
    world.backend.ready_all()
    await world.reconciler.tick()
    assert world.endpoint("e") == ("InService", "")


async def test_a_copy_the_backend_gave_up_on_fails_the_endpoint_with_its_words(world: World) -> None:
    classic(world)
    await world.until(lambda: len(world.backend.copies) == 1)
    [copy_id] = world.backend.copies
    world.backend.set_state(copy_id, CopyState.FAILED, "the model failed to load: bad magic")
    await world.reconciler.tick()
    assert world.endpoint("e") == ("Failed", f"Copy {copy_id} failed: the model failed to load: bad magic")


async def test_in_service_survives_a_copy_being_restarted(world: World) -> None:
    hosting(world, copies=2)
    await world.until(lambda: len(world.backend.copies) == 2)
    world.backend.ready_all()
    await world.until(lambda: world.component("ic")[0] == "InService")
    world.backend.set_state(sorted(world.backend.copies)[0], CopyState.RESTARTING, "exited with 137")
    await world.reconciler.tick()
    assert world.component("ic") == ("InService", "")
    assert world.endpoint("host") == ("InService", "")
    assert world.backend.stopped == []  # the backend restarts it; the reconciler leaves it alone


async def test_an_update_rolls_old_copies_serve_until_new_ones_are_ready(world: World) -> None:
    hosting(world, environment={"MAX_TOTAL_TOKENS": "512"})
    await world.until(lambda: len(world.backend.copies) == 1)
    world.backend.ready_all()
    await world.until(lambda: world.component("ic")[0] == "InService")
    [old] = world.backend.copies

    world.call("UpdateInferenceComponent", InferenceComponentName="ic", Specification={
        "ModelName": "m", "Container": {"Environment": {"MAX_TOTAL_TOKENS": "1024"}},
        "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}})
    assert world.component("ic")[0] == "Updating"
    await world.until(lambda: len(world.backend.copies) == 2)
    [new] = set(world.backend.copies) - {old}
    assert world.backend.specs[new].environment == {"MAX_TOTAL_TOKENS": "1024"}
    await world.reconciler.tick()
    assert old in world.backend.copies  # still serving while the new one loads

    world.backend.set_state(new, CopyState.READY)
    await world.until(lambda: old not in world.backend.copies)
    assert world.component("ic") == ("InService", "")


async def test_deleting_stops_copies_then_forgets(world: World) -> None:
    hosting(world, copies=2)
    await world.until(lambda: len(world.backend.copies) == 2)
    world.call("DeleteInferenceComponent", InferenceComponentName="ic")
    assert world.component("ic")[0] == "Deleting"
    await world.until(lambda: world.state.components.get("ic") is None)
    assert world.backend.copies == {}
    world.call("DeleteEndpoint", EndpointName="host")
    await world.until(lambda: world.state.endpoints.get("host") is None)


async def test_a_deleted_model_does_not_touch_the_endpoints_made_from_it(world: World) -> None:
    classic(world)
    world.call("DeleteModel", ModelName="m")
    world.call("DeleteEndpointConfig", EndpointConfigName="c")
    await world.until(lambda: len(world.backend.copies) == 1)
    world.backend.ready_all()
    await world.until(lambda: world.endpoint("e")[0] == "InService")


async def test_past_the_hosts_cap_a_component_fails_with_why(world: World) -> None:
    world.reconciler.copy_cap = CopyCap(1, "PIER_MAX_COPIES_PER_HOST=1")  # lowered after the component was made
    hosting(world, copies=2)
    await world.until(lambda: world.component("ic")[0] == "Failed")
    assert len(world.backend.copies) == 1
    assert world.component("ic")[1].startswith("1 of 2 copies not started: this host runs at most 1 copies "
                                               "(PIER_MAX_COPIES_PER_HOST=1)")


async def test_an_unreadable_record_is_skipped_with_a_logged_reason(world: World,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    hosting(world, copies=2)
    await world.until(lambda: len(world.backend.copies) == 2)
    running = dict(world.backend.copies)
    with world.state.transaction() as db:
        db.execute("UPDATE inference_components SET body = '{\"copies\": \"two\"}' WHERE name = 'ic'")
    for _ in range(3):
        await world.reconciler.tick()
    assert world.backend.copies == running and world.backend.stopped == []  # neither started nor stopped
    assert caplog.text.count("skipping inference component ic: pier cannot read its stored record") == 1
    world.call("DeleteInferenceComponent", InferenceComponentName="ic")  # the way out
    await world.until(lambda: world.backend.copies == {})


class DrainingBackend(FakeBackend):
    """A fake backend whose stops take until the test lets them end, as a copy drains its requests."""

    def __init__(self) -> None:
        super().__init__(auto_ready=False)
        self.drained = asyncio.Event()

    async def stop(self, copy_id: str) -> None:
        await self.drained.wait()
        await super().stop(copy_id)


async def test_a_copy_being_stopped_is_draining_and_takes_no_new_requests(world: World) -> None:
    world.backend = world.reconciler.backend = backend = DrainingBackend()
    hosting(world, copies=2)
    await world.until(lambda: len(backend.copies) == 2)
    backend.ready_all()
    await world.until(lambda: world.component("ic")[0] == "InService")
    world.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName="ic",
               DesiredRuntimeConfig={"CopyCount": 1})
    await world.reconciler.tick()
    states = sorted((c.state, c.message) for c in world.reconciler.copies("ic"))
    assert states == [(CopyState.READY, ""), (CopyState.STARTING, "draining: stopped by pier")]
    assert len(backend.statuses()) == 2  # still running: it finishes what it has
    backend.drained.set()
    await world.until(lambda: len(backend.copies) == 1)
    assert [c.state for c in world.reconciler.copies("ic")] == [CopyState.READY]


class MidTickBackend(FakeBackend):
    """A fake backend that runs `during` once, the next time a tick asks for the copies' statuses: a control-plane
    call landing on the writer thread while the reconciler (on the event loop) is between reading the records and
    writing their new statuses."""

    def __init__(self) -> None:
        super().__init__(auto_ready=False)
        self.during: Callable[[], Any] | None = None

    def statuses(self) -> list[Any]:
        during, self.during = self.during, None
        if during is not None:
            during()
        return super().statuses()


async def test_a_delete_during_a_tick_is_not_undone_by_its_status_write(world: World) -> None:
    world.backend = world.reconciler.backend = backend = MidTickBackend()
    hosting(world)
    await world.until(lambda: len(backend.copies) == 1)
    backend.ready_all()  # the next tick would move the component from Creating to InService
    backend.during = lambda: world.call("DeleteInferenceComponent", InferenceComponentName="ic")
    await world.reconciler.tick()
    assert world.component("ic")[0] == "Deleting"
    await world.until(lambda: world.state.components.get("ic") is None)


async def test_a_copy_count_changed_during_a_tick_is_kept(world: World) -> None:
    world.backend = world.reconciler.backend = backend = MidTickBackend()
    hosting(world)
    await world.until(lambda: len(backend.copies) == 1)
    backend.ready_all()
    backend.during = lambda: world.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName="ic",
                                        DesiredRuntimeConfig={"CopyCount": 2})
    await world.reconciler.tick()
    described = world.call("DescribeInferenceComponent", InferenceComponentName="ic")
    assert described["RuntimeConfig"]["DesiredCopyCount"] == 2


async def test_a_name_made_again_during_a_tick_is_not_deleted_with_the_old_one(world: World) -> None:
    world.backend = world.reconciler.backend = backend = MidTickBackend()
    hosting(world)
    await world.until(lambda: len(backend.copies) == 1)
    world.call("DeleteInferenceComponent", InferenceComponentName="ic")
    await world.until(lambda: backend.copies == {})  # its copy stopped; the row goes on the next tick

    def again() -> None:  # the record is read as Deleting; it is deleted and made anew before the tick ends
        world.state.components.delete("ic")
        world.call("CreateInferenceComponent", InferenceComponentName="ic", EndpointName="host", Specification={
            "ModelName": "m", "ComputeResourceRequirements": {"NumberOfCpuCoresRequired": 1,
                                                              "MinMemoryRequiredInMb": 256}})

    backend.during = again
    await world.reconciler.tick()
    assert world.component("ic")[0] == "Creating"


async def test_the_copies_are_published_before_a_status_sends_anyone_to_them(world: World) -> None:
    """Other gateways route by what the leader publishes (gateway/copy_board.py) and read the endpoint fresh: the
    copies a tick finds ready are published before that tick stores InService (or a deployment's next step)."""
    published: list[tuple[str, list[CopyState]]] = []

    async def publish() -> None:
        published.append((world.endpoint("e")[0], [c.state for c in world.backend.statuses()]))

    world.reconciler.publish = publish
    classic(world)
    await world.until(lambda: len(world.backend.copies) == 1)
    world.backend.ready_all()
    await world.reconciler.tick()
    assert world.endpoint("e") == ("InService", "")
    assert published[-1] == ("Creating", [CopyState.READY])
