"""Handing this host's GPUs to placed copies (a fake inventory of 4 GPUs), and how many GPUs a classic variant's
copy uses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.console import Console

from pier.control.api import ControlPlane
from pier.control.capacity import Placement
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.gpu_pool import GpuPool, classic_gpus, grant
from pier.control.instance_types import InstanceType, lookup
from pier.control.reconciler import Reconciler
from pier.control.resource_store import ResourceStore
from pier.control.workload import Workload
from pier.gpus import GpuInventory, fake
from tests.control.fakes import FakeBackend
from tests.control.test_reconciler_loop import World

FOUR = GpuPool(fake(4))
NONE = GpuPool(GpuInventory())
A, B = Workload("a"), Workload("b")


def copies(workload: Workload, count: int, gpus: int = 1, instance: int = 0) -> list[Placement]:
    return [Placement(workload, n, instance, (), tuple(range(gpus))) for n in range(count)]


def devices(placements: tuple[Placement, ...]) -> list[tuple[str, int, tuple[int, ...], bool]]:
    return [(p.workload, p.ordinal, p.devices, p.on_cpu) for p in placements]


@pytest.mark.parametrize(("what", "placements", "expected", "short"), [
    ("4 single-GPU copies get disjoint GPUs",
     copies(A, 4), [(A, 0, (0,), False), (A, 1, (1,), False), (A, 2, (2,), False), (A, 3, (3,), False)], {}),
    ("the fifth single-GPU copy is refused",
     copies(A, 5), [(A, n, (n,), False) for n in range(4)], {A: 1}),
    ("two copies of two GPUs",
     copies(A, 1, gpus=2) + copies(B, 1, gpus=2), [(A, 0, (0, 1), False), (B, 0, (2, 3), False)], {}),
    ("a copy that needs more GPUs than are left is refused whole, never given fewer",
     copies(A, 1, gpus=3) + copies(B, 1, gpus=2), [(A, 0, (0, 1, 2), False)], {B: 1}),
    ("copies that want no GPU hold none",
     copies(A, 6, gpus=0), [(A, n, (), False) for n in range(6)], {}),
])
def test_grant_on_four_gpus(what: str, placements: list[Placement],
                            expected: list[tuple[str, int, tuple[int, ...], bool]], short: dict[str, int]) -> None:
    granted = grant(placements, (), FOUR)
    assert devices(granted.placements) == expected
    assert {s.workload: s.missing for s in granted.shortfalls} == short
    held = [d for p in granted.placements for d in p.devices]
    assert len(held) == len(set(held))  # never two copies on one GPU


def test_the_refusal_names_gpus_and_how_to_make_room() -> None:
    [busy] = grant(copies(A, 5), (), FOUR).shortfalls
    assert busy.reason.startswith("Insufficient capacity: each copy needs 1 GPU of its own and 0 of this host's "
                                  "4 x Fake GPU")
    assert "NumberOfAcceleratorDevicesRequired" in busy.reason and "pier up --cpu-fallback" in busy.reason
    [none] = grant(copies(A, 1), (), NONE).shortfalls
    assert "each copy needs 1 GPU of its own and this host has no GPUs" in none.reason
    [few] = grant(copies(A, 1, gpus=8), (), FOUR).shortfalls
    assert "needs 8 GPUs of its own and this host has only 4 x Fake GPU" in few.reason


def test_copies_keep_their_gpus_and_freed_gpus_go_to_the_next() -> None:
    first = grant(copies(A, 2) + copies(B, 2), (), FOUR).placements
    assert devices(first) == [(A, 0, (0,), False), (A, 1, (1,), False), (B, 0, (2,), False), (B, 1, (3,), False)]
    # A scales in to one copy and a new workload comes first in order: B's copies keep GPUs 2 and 3, and the GPU
    # A's second copy released goes to the newcomer.
    again = grant(copies(Workload("c"), 1) + copies(A, 1) + copies(B, 2), first, FOUR)
    assert devices(again.placements) == [("c", 0, (1,), False), (A, 0, (0,), False), (B, 0, (2,), False),
                                         (B, 1, (3,), False)]


def test_with_cpu_fallback_a_copy_without_gpus_runs_on_cpu_and_stays_there() -> None:
    fallback = GpuPool(fake(1), cpu_fallback=True)
    granted = grant(copies(A, 2), (), fallback)
    assert devices(granted.placements) == [(A, 0, (0,), False), (A, 1, (), True)] and not granted.shortfalls
    assert devices(grant(copies(A, 1), (), GpuPool(GpuInventory(), cpu_fallback=True)).placements) == [
        (A, 0, (), True)]
    # GPU 0 comes free: the copy on CPU is not moved (that would restart it); a new copy takes the GPU.
    later = grant([granted.placements[1], *copies(B, 1)], granted.placements[1:], fallback)
    assert devices(later.placements) == [(A, 1, (), True), (B, 0, (0,), False)]


def test_a_backend_that_places_gpus_itself_gets_placements_as_they_are() -> None:
    placements = copies(A, 9)
    assert grant(placements, (), GpuPool(None)).placements == tuple(placements)


G5_12XL = lookup("ml.g5.12xlarge")
C7G = lookup("ml.c7g.xlarge")
LOCAL_NONE = InstanceType("local", 2, 4096, 0)


@pytest.mark.parametrize(("environment", "itype", "gpus", "problem"), [
    ({}, G5_12XL, 4, ""),  # every GPU of the instance
    ({}, C7G, 0, ""),
    ({"SM_NUM_GPUS": "2"}, G5_12XL, 2, ""),
    ({"NUM_SHARD": "1"}, G5_12XL, 1, ""),
    ({"SM_NUM_GPUS": "2", "NUM_SHARD": "4"}, G5_12XL, 2, ""),  # as TGI's SageMaker entrypoint: SM_NUM_GPUS wins
    ({"SM_NUM_GPUS": "8"}, G5_12XL, 0, "SM_NUM_GPUS=8, more GPUs than one ml.g5.12xlarge (48 vCPUs, 196608 MiB, 4 "
                                       "GPUs)"),
    ({"SM_NUM_GPUS": "1"}, C7G, 0, "more GPUs than one ml.c7g.xlarge"),
    ({"SM_NUM_GPUS": "two"}, G5_12XL, 0, "SM_NUM_GPUS='two', which is not a whole number of GPUs"),
    ({"NUM_SHARD": "0"}, G5_12XL, 0, "NUM_SHARD='0', which is not a whole number of GPUs of at least 1"),
    ({"SM_NUM_GPUS": "1"}, LOCAL_NONE, 1, ""),  # on `local` the host's GPUs decide (grant refuses, or falls back)
])
def test_gpus_per_classic_copy(environment: dict[str, str], itype: InstanceType, gpus: int, problem: str) -> None:
    count, why = classic_gpus(environment, itype)
    assert count == gpus
    assert (problem in why) if problem else why == ""


# ---- through the reconciler: the real control plane and state, a backend that runs nothing


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Callable[[GpuPool], World]]:
    """A World (tests/control/test_reconciler_loop.py) whose reconciler hands out the GPUs of the given pool."""
    made: list[World] = []

    def make(pool: GpuPool) -> World:
        state = ResourceStore.open(tmp_path / f"state-{len(made)}")
        backend = FakeBackend(auto_ready=True)
        fetches = Fetches(ModelStore(tmp_path / "cache", console=Console(quiet=True)))
        reconciler = Reconciler(state, backend, fetches, host=(0, 1), gpus=pool)
        model = tmp_path / "model"
        model.mkdir(exist_ok=True)
        (model / "m.gguf").write_bytes(b"GGUF")
        made.append(World(state, backend, reconciler, ControlPlane(state, copies=reconciler.copies)))
        made[-1].call("CreateModel", ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        made[-1].call("CreateModel", ModelName="tgi", PrimaryContainer={
            "ModelDataUrl": str(model), "Environment": {"SM_NUM_GPUS": "2"}})
        return made[-1]

    yield make
    for w in made:
        w.reconciler.fetches.close()
        w.state.close()


def gpu_component(world: World, copies: int, *, instances: int = 1, itype: str = "ml.g5.12xlarge",
                  name: str = "ic") -> None:
    if world.state.endpoints.get("host") is None:
        world.call("CreateEndpointConfig", EndpointConfigName="h", ProductionVariants=[{
            "VariantName": "AllTraffic", "InstanceType": itype, "InitialInstanceCount": instances}])
        world.call("CreateEndpoint", EndpointName="host", EndpointConfigName="h")
    world.call("CreateInferenceComponent", InferenceComponentName=name, EndpointName="host", Specification={
        "ModelName": "m", "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": copies})


def held(world: World) -> list[tuple[str, ...]]:
    return sorted(spec.gpus for spec in world.backend.specs.values())


@pytest.mark.anyio
async def test_copies_get_disjoint_gpus_and_the_fifth_is_refused(world: Callable[[GpuPool], World]) -> None:
    """Two ml.g5.12xlarge instances budget 8 GPUs; the host has 4: the fifth copy gets none, and says so."""
    w = world(FOUR)
    gpu_component(w, 5, instances=2)
    await w.until(lambda: w.component("ic")[0] == "Failed")
    assert held(w) == [("0",), ("1",), ("2",), ("3",)]
    reason = w.component("ic")[1]
    assert reason.startswith("1 of 5 copies not placed. Insufficient capacity: each copy needs 1 GPU of its own and "
                             "0 of this host's 4 x Fake GPU")
    # Scaling in to 4 serves; deleting it releases its GPUs to the next component.
    w.call("UpdateInferenceComponentRuntimeConfig", InferenceComponentName="ic", DesiredRuntimeConfig={"CopyCount": 4})
    await w.until(lambda: w.component("ic")[0] == "InService")
    w.call("DeleteInferenceComponent", InferenceComponentName="ic")
    gpu_component(w, 4, instances=2, name="next")
    await w.until(lambda: w.component("next")[0] == "InService" and w.state.components.get("ic") is None)
    assert held(w) == [("0",), ("1",), ("2",), ("3",)]


@pytest.mark.anyio
async def test_one_instance_of_four_gpus_refuses_the_fifth_copy_itself(world: Callable[[GpuPool], World]) -> None:
    w = world(FOUR)
    gpu_component(w, 5)
    await w.until(lambda: w.component("ic")[0] == "Failed")
    assert len(held(w)) == 4 and "1 GPU (at most 0 free on an instance)" in w.component("ic")[1]


@pytest.mark.anyio
async def test_sm_num_gpus_gives_a_classic_copy_two_gpus(world: Callable[[GpuPool], World]) -> None:
    w = world(FOUR)
    w.call("CreateEndpointConfig", EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "tgi", "InstanceType": "ml.g5.12xlarge",
        "InitialInstanceCount": 2}])
    w.call("CreateEndpoint", EndpointName="e", EndpointConfigName="c")
    await w.until(lambda: w.endpoint("e")[0] == "InService")
    assert held(w) == [("0", "1"), ("2", "3")]
    assert {spec.accelerators for spec in w.backend.specs.values()} == {2}


@pytest.mark.anyio
async def test_a_classic_gpu_variant_takes_every_gpu_of_its_instance(world: Callable[[GpuPool], World]) -> None:
    w = world(FOUR)
    w.call("CreateEndpointConfig", EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g5.2xlarge", "InitialInstanceCount": 1}])
    w.call("CreateEndpoint", EndpointName="e", EndpointConfigName="c")
    await w.until(lambda: w.endpoint("e")[0] == "InService")
    assert held(w) == [("0",)]


@pytest.mark.anyio
async def test_without_gpus_a_gpu_request_fails_naming_gpus(world: Callable[[GpuPool], World]) -> None:
    w = world(NONE)
    gpu_component(w, 1)
    await w.until(lambda: w.component("ic")[0] == "Failed")
    assert w.backend.specs == {}  # never run silently on CPU
    assert "each copy needs 1 GPU of its own and this host has no GPUs" in w.component("ic")[1]


@pytest.mark.anyio
async def test_with_cpu_fallback_a_gpu_request_serves_on_cpu(world: Callable[[GpuPool], World]) -> None:
    w = world(GpuPool(GpuInventory(), cpu_fallback=True))
    gpu_component(w, 2)
    await w.until(lambda: w.component("ic")[0] == "InService")
    assert [(s.gpus, s.cpu_fallback, s.accelerators) for s in w.backend.specs.values()] == [((), True, 1)] * 2


def test_a_flexible_workload_takes_free_gpus_or_runs_on_cpu_unrefused() -> None:
    """A classic variant on `local` without SM_NUM_GPUS asked for no GPU: the host's when free, else CPU."""
    granted = grant(copies(A, 1, gpus=4) + copies(B, 1, gpus=4), (), FOUR, flexible={B})
    assert devices(granted.placements) == [(A, 0, (0, 1, 2, 3), False), (B, 0, (), False)]
    assert granted.placements[1].accelerators == () and not granted.shortfalls


@pytest.mark.anyio
async def test_on_local_a_second_classic_endpoint_runs_on_cpu_when_the_gpus_are_held(
        world: Callable[[GpuPool], World]) -> None:
    w = world(GpuPool(fake(1)))
    for name in ("one", "two"):
        w.call("CreateEndpointConfig", EndpointConfigName=name, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])
        w.call("CreateEndpoint", EndpointName=name, EndpointConfigName=name)
    await w.until(lambda: w.endpoint("one")[0] == w.endpoint("two")[0] == "InService")
    assert sorted((s.component, s.gpus, s.accelerators, s.cpu_fallback) for s in w.backend.specs.values()) == [
        ("one/AllTraffic", ("0",), 1, False), ("two/AllTraffic", (), 0, False)]
