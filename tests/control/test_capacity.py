from __future__ import annotations

import pytest

from pier.control.capacity import Demand, Placement, pack, too_big, whole_instances
from pier.control.instance_types import InstanceType

C7G_XL = InstanceType("ml.c7g.xlarge", 4, 8192)
G5_12XL = InstanceType("ml.g5.12xlarge", 48, 196608, 4)


def placed(packing) -> list[tuple[str, int, int, tuple[int, ...]]]:
    return [(s.workload, s.ordinal, s.instance, s.vcpus) for s in packing.placements]


@pytest.mark.parametrize(("name", "itype", "count", "demands", "placements", "missing"), [
    ("two copies of one core each share an instance, each with its own vCPU",
     C7G_XL, 1, [Demand("a", 2, cores=1, memory_mb=1024)],
     [("a", 0, 0, (0,)), ("a", 1, 0, (1,))], {}),
    ("copies spread over instances, least loaded first",
     C7G_XL, 2, [Demand("a", 3, cores=1, memory_mb=1024)],
     [("a", 0, 0, (0,)), ("a", 1, 1, (0,)), ("a", 2, 0, (1,))], {}),
    ("fractional cores round up to whole vCPUs",
     C7G_XL, 1, [Demand("a", 2, cores=2, memory_mb=128)],
     [("a", 0, 0, (0, 1)), ("a", 1, 0, (2, 3))], {}),
    ("out of cores: the third copy does not fit",
     C7G_XL, 1, [Demand("a", 3, cores=2, memory_mb=128)],
     [("a", 0, 0, (0, 1)), ("a", 1, 0, (2, 3))], {"a": 1}),
    ("cores 0 reserve nothing: copies share the instance",
     C7G_XL, 1, [Demand("a", 5, cores=0, memory_mb=1024)],
     [("a", n, 0, ()) for n in range(5)], {}),
    ("out of memory",
     C7G_XL, 1, [Demand("a", 3, memory_mb=3000)],
     [("a", 0, 0, ()), ("a", 1, 0, ())], {"a": 1}),
    ("a shared GGUF counts once per instance: 4 x (500 private + 2000 weights) fits 8192 MiB",
     C7G_XL, 1, [Demand("a", 4, memory_mb=2500, weights="/m/x.gguf", weights_mb=2000)],
     [("a", n, 0, ()) for n in range(4)], {}),
    ("the same weights counted without sharing would not fit",
     C7G_XL, 1, [Demand("a", 4, memory_mb=2500)],
     [("a", n, 0, ()) for n in range(3)], {"a": 1}),
    ("two components with the same weights share them too",
     C7G_XL, 1, [Demand("a", 1, memory_mb=4000, weights="w", weights_mb=4000),
                 Demand("b", 1, memory_mb=4000, weights="w", weights_mb=4000)],
     [("a", 0, 0, ()), ("b", 0, 0, ())], {}),
    ("accelerators: the seed's 8 replicas of 1 GPU do not fit 4 GPUs",
     G5_12XL, 1, [Demand("llama", 8, cores=4, memory_mb=10240, accelerators=1)],
     [("llama", n, 0, (4 * n, 4 * n + 1, 4 * n + 2, 4 * n + 3)) for n in range(4)], {"llama": 4}),
    ("components are placed in order, the later one gets what is left",
     C7G_XL, 1, [Demand("a", 1, cores=3, memory_mb=128), Demand("b", 2, cores=1, memory_mb=128)],
     [("a", 0, 0, (0, 1, 2)), ("b", 0, 0, (3,))], {"b": 1}),
    ("zero instances place nothing",
     C7G_XL, 0, [Demand("a", 1, memory_mb=128)], [], {"a": 1}),
    ("zero copies need nothing",
     C7G_XL, 1, [Demand("a", 0, memory_mb=128)], [], {}),
])
def test_pack(name: str, itype: InstanceType, count: int, demands: list[Demand],
              placements: list[tuple[str, int, int, tuple[int, ...]]], missing: dict[str, int]) -> None:
    packing = pack(itype, count, demands)
    assert placed(packing) == sorted(placements), name
    assert {s.workload: s.missing for s in packing.shortfalls} == missing, name


@pytest.mark.parametrize(("name", "keep", "demands", "placements"), [
    ("kept copies stay on their vCPUs; new ones take the free ones",
     [Placement("a", 0, 0, (2,))], [Demand("a", 2, cores=1, memory_mb=128)],
     [("a", 0, 0, (2,)), ("a", 1, 0, (0,))]),
    ("another component shrinking does not move this one",
     [Placement("a", 0, 0, (0,)), Placement("b", 0, 0, (1,)), Placement("b", 1, 0, (2,))],
     [Demand("a", 1, cores=1, memory_mb=128), Demand("b", 2, cores=1, memory_mb=128)],
     [("a", 0, 0, (0,)), ("b", 0, 0, (1,)), ("b", 1, 0, (2,))]),
    ("shrinking drops the highest ordinals",
     [Placement("a", 0, 0, (0,)), Placement("a", 1, 0, (1,))], [Demand("a", 1, cores=1, memory_mb=128)],
     [("a", 0, 0, (0,))]),
    ("a placement whose size no longer matches the demand is placed again",
     [Placement("a", 0, 0, (3,))], [Demand("a", 1, cores=2, memory_mb=128)],
     [("a", 0, 0, (0, 1))]),
    ("placements of deleted components are forgotten",
     [Placement("gone", 0, 0, (0,))], [Demand("a", 1, cores=1, memory_mb=128)],
     [("a", 0, 0, (0,))]),
])
def test_pack_keeps_placed_copies(name: str, keep: list[Placement], demands: list[Demand],
                                  placements: list[tuple[str, int, int, tuple[int, ...]]]) -> None:
    assert placed(pack(C7G_XL, 1, demands, keep)) == sorted(placements), name


def test_shortfall_names_what_is_missing_and_how_to_fix_it() -> None:
    packing = pack(C7G_XL, 1, [Demand("a", 3, cores=2, memory_mb=128)])
    reason = packing.shortfalls[0].reason
    assert "2 CPU cores (at most 0 free on an instance)" in reason
    assert "ml.c7g.xlarge" in reason and "Lower CopyCount" in reason

    memory = pack(C7G_XL, 1, [Demand("a", 1, memory_mb=10000)]).shortfalls[0].reason
    assert "10000 MiB of memory (at most 8192 MiB free" in memory

    gpus = pack(C7G_XL, 1, [Demand("a", 1, memory_mb=128, accelerators=1)]).shortfalls[0].reason
    assert "1 GPU (at most 0 free on an instance)" in gpus


def test_classic_variant_gets_one_copy_per_instance_owning_it() -> None:
    placements = whole_instances("e/AllTraffic", C7G_XL, 2)
    assert [(s.ordinal, s.instance, s.vcpus) for s in placements] == [(0, 0, (0, 1, 2, 3)), (1, 1, (0, 1, 2, 3))]


@pytest.mark.parametrize(("demand", "words"), [
    (Demand("a", 1, cores=4, memory_mb=8192), ""),
    (Demand("a", 1, cores=5, memory_mb=128), "needs 5 CPU cores, more than a whole ml.c7g.xlarge"),
    (Demand("a", 1, memory_mb=9000), "needs 9000 MiB of memory"),
    (Demand("a", 1, cores=8, memory_mb=9000, accelerators=1), "needs 8 CPU cores and 9000 MiB of memory and 1 GPU,"),
])
def test_a_copy_bigger_than_an_instance(demand: Demand, words: str) -> None:
    reason = too_big(C7G_XL, demand)
    assert (words in reason) if words else reason == ""
