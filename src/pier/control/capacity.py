"""Packing copies onto a variant's instances: pure, so every case is a row in a table-driven test.

Each copy gets whole vCPUs of one instance to itself (NumberOfCpuCoresRequired rounded up; 0 reserves none
and shares the instance's cores), its memory and its accelerators. Copies of the same weights file map the
same pages (llama.cpp mmaps the GGUF), so on an instance a file's size is counted once, however many copies
use it; a copy's MinMemoryRequiredInMb is read as its whole need, weights included, as SageMaker reads it.
Copies already placed keep their place, so changing one component never moves another's copies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from pier.control.instance_types import InstanceType, gpus, host_cores, host_memory_mb
from pier.control.workload import Workload
from pier.env import GATEWAY, Env, integer


@dataclass(frozen=True)
class Demand:
    """What every copy of one workload (an inference component, or a classic variant's model) needs."""

    workload: Workload
    copies: int
    cores: int = 0  # whole vCPUs reserved per copy; 0 reserves none and shares the instance's
    memory_mb: int = 0
    accelerators: int = 0
    weights: str = ""  # identity of the weights file the copies map ("" = none shared)
    weights_mb: int = 0

    @property
    def private_mb(self) -> int:
        return max(0, self.memory_mb - self.weights_mb) if self.weights else self.memory_mb


@dataclass(frozen=True)
class Placement:
    """Where one copy runs: an instance of the variant and the vCPUs (and accelerators) it owns there."""

    workload: Workload
    ordinal: int
    instance: int
    vcpus: tuple[int, ...] = ()
    accelerators: tuple[int, ...] = ()  # the instance's GPUs it owns (instance-relative, as the type counts them)
    devices: tuple[int, ...] = ()  # this host's GPUs handed to it (pier.control.gpu_pool); () until then, or none
    on_cpu: bool = False  # it wants GPUs, the host had none to give, and the operator allowed `--cpu-fallback`


@dataclass(frozen=True)
class Shortfall:
    workload: Workload
    missing: int  # copies that could not be placed
    reason: str  # what is short, and how to make room


@dataclass(frozen=True)
class Packing:
    placements: tuple[Placement, ...]
    shortfalls: tuple[Shortfall, ...] = ()


@dataclass
class _Free:
    """What is left on one instance while packing."""

    index: int
    vcpus: list[int]
    memory_mb: int
    accelerators: list[int]
    weights: set[str] = field(default_factory=set)
    copies: int = 0

    def need_mb(self, demand: Demand) -> int:
        shared = demand.weights_mb if demand.weights and demand.weights not in self.weights else 0
        return demand.private_mb + shared

    def fits(self, demand: Demand) -> bool:
        return (len(self.vcpus) >= demand.cores and self.memory_mb >= self.need_mb(demand)
                and len(self.accelerators) >= demand.accelerators)

    def take(self, demand: Demand, ordinal: int) -> Placement:
        cores, accelerators = demand.cores, demand.accelerators
        vcpus, self.vcpus = self.vcpus[:cores], self.vcpus[cores:]
        devices, self.accelerators = self.accelerators[:accelerators], self.accelerators[accelerators:]
        return self._charge(demand, Placement(demand.workload, ordinal, self.index, tuple(vcpus), tuple(devices)))

    def reclaim(self, demand: Demand, placement: Placement) -> Placement | None:
        """Keep a copy where it already runs, if its resources there are still free."""
        if len(placement.vcpus) != demand.cores or len(placement.accelerators) != demand.accelerators:
            return None
        if not (set(placement.vcpus) <= set(self.vcpus) and set(placement.accelerators) <= set(self.accelerators)):
            return None
        if self.memory_mb < self.need_mb(demand):
            return None
        self.vcpus = [v for v in self.vcpus if v not in placement.vcpus]
        self.accelerators = [a for a in self.accelerators if a not in placement.accelerators]
        return self._charge(demand, placement)

    def _charge(self, demand: Demand, placement: Placement) -> Placement:
        self.memory_mb -= self.need_mb(demand)
        if demand.weights:
            self.weights.add(demand.weights)
        self.copies += 1
        return placement


def pack(itype: InstanceType, count: int, demands: Sequence[Demand], keep: Iterable[Placement] = ()) -> Packing:
    """Place `copies` of every demand on `count` instances of `itype`, keeping the placements in `keep` that still
    fit; new copies go to the least-loaded instance that fits (spread, as SageMaker spreads copies)."""
    free = [_Free(i, list(range(itype.vcpus)), itype.memory_mb, list(range(itype.accelerators)))
            for i in range(count)]
    by_workload = {d.workload: d for d in demands}
    placed: dict[tuple[str, int], Placement] = {}
    for placement in sorted(keep, key=lambda s: (s.workload, s.ordinal)):
        demand = by_workload.get(placement.workload)
        if demand is None or placement.ordinal >= demand.copies or placement.instance >= count:
            continue
        kept = free[placement.instance].reclaim(demand, placement)
        if kept is not None:
            placed[(placement.workload, placement.ordinal)] = kept
    shortfalls = [s for d in demands if (s := _place(d, free, placed, itype, count)) is not None]
    placements = sorted(placed.values(), key=lambda s: (s.workload, s.ordinal))
    return Packing(tuple(placements), tuple(shortfalls))


def _place(demand: Demand, free: list[_Free], placed: dict[tuple[str, int], Placement],
           itype: InstanceType, count: int) -> Shortfall | None:
    wanted = [n for n in range(demand.copies) if (demand.workload, n) not in placed]
    for done, ordinal in enumerate(wanted):
        candidates = [f for f in free if f.fits(demand)]
        if not candidates:
            return Shortfall(demand.workload, len(wanted) - done, _why(demand, free, itype, count))
        target = min(candidates, key=lambda f: (f.copies, f.index))
        placed[(demand.workload, ordinal)] = target.take(demand, ordinal)
    return None


def _why(demand: Demand, free: list[_Free], itype: InstanceType, count: int) -> str:
    """Name the resource that is short, with the most any instance has left of it."""
    where = f"{count} x {itype.describe()}"
    if not free:
        return f"The variant has no instances ({where}): raise its count with UpdateEndpointWeightsAndCapacities."
    short = []
    if demand.cores > max(len(f.vcpus) for f in free):
        short.append(f"{demand.cores} CPU cores (at most {max(len(f.vcpus) for f in free)} free on an instance)")
    if not any(f.memory_mb >= f.need_mb(demand) for f in free):
        short.append(f"{min(f.need_mb(demand) for f in free)} MiB of memory (at most "
                     f"{max(f.memory_mb for f in free)} MiB free on an instance)")
    if demand.accelerators > max(len(f.accelerators) for f in free):
        short.append(f"{gpus(demand.accelerators)} (at most {max(len(f.accelerators) for f in free)} free on an "
                     "instance)")
    if not short:  # each resource fits somewhere, but never all on the same instance
        short.append(f"{demand.cores} CPU cores, {demand.memory_mb} MiB, {gpus(demand.accelerators)} at once")
    return (
        f"Not enough capacity on {where} for another copy: it needs {' and '.join(short)}. Lower CopyCount or "
        "ComputeResourceRequirements, delete other inference components, or give the variant more or larger "
        "instances (UpdateEndpointWeightsAndCapacities or UpdateEndpoint)."
    )


def too_big(itype: InstanceType, demand: Demand) -> str:
    """Why one copy of `demand` could not fit even an empty instance of `itype` ("" when it fits)."""
    packing = pack(itype, 1, [Demand(demand.workload, 1, demand.cores, demand.memory_mb, demand.accelerators)])
    if not packing.shortfalls:
        return ""
    needs = [words for n, have, words in (
        (demand.cores, itype.vcpus, f"{demand.cores} CPU cores"),
        (demand.memory_mb, itype.memory_mb, f"{demand.memory_mb} MiB of memory"),
        (demand.accelerators, itype.accelerators, gpus(demand.accelerators))) if n > have]
    return (f"One copy of {demand.workload} needs {' and '.join(needs)}, more than a whole {itype.describe()} has. "
            "Lower ComputeResourceRequirements or give the endpoint a larger InstanceType.")


def whole_instances(workload: Workload, itype: InstanceType, count: int,
                    gpus_per_copy: int | None = None) -> tuple[Placement, ...]:
    """A classic variant (its model named in the endpoint config): one copy per instance, owning all of it, and
    `gpus_per_copy` of its GPUs (default: all of them)."""
    every = tuple(range(itype.vcpus))
    accelerators = tuple(range(itype.accelerators if gpus_per_copy is None else gpus_per_copy))
    return tuple(Placement(workload, i, i, every, accelerators) for i in range(count))


# ---- how many copies one host holds

COPY_CAP_SETTING = "PIER_MAX_COPIES_PER_HOST"
MIB_PER_COPY = 256  # a model server's own memory before its model and KV cache: the least a copy needs
COPIES_PER_CORE = 4  # past this, copies only take turns on the cores


def default_copy_cap(cores: int, memory_mb: int) -> int:
    """The copies a host with `cores` and `memory_mb` holds by default: 4 per core, and one per 256 MiB."""
    return max(1, min(COPIES_PER_CORE * cores, memory_mb // MIB_PER_COPY))


def copy_cap_setting(env: Mapping[str, str] | None = None) -> int | None:
    """PIER_MAX_COPIES_PER_HOST, when set."""
    return Env(env, GATEWAY).get(COPY_CAP_SETTING, cast=integer(), problem=(
        "{name}={raw!r} is not a whole number of copies of at least 1; unset it for the default (from this host's "
        "cores and memory)."))


def host_copy_cap(env: Mapping[str, str] | None = None) -> CopyCap:
    """This host's cap: PIER_MAX_COPIES_PER_HOST when set, else `default_copy_cap` of its cores and memory."""
    return copy_cap_of(copy_cap_setting(env))


def copy_cap_of(setting: int | None) -> CopyCap:
    """This host's cap: `setting` (PIER_MAX_COPIES_PER_HOST) when there is one, else `default_copy_cap` of its
    cores and memory."""
    if setting is not None:
        return CopyCap(setting, f"{COPY_CAP_SETTING}={setting}")
    cores, memory = len(host_cores()), host_memory_mb()
    return CopyCap(default_copy_cap(cores, memory), f"from its {cores} cores and {memory} MiB; {COPY_CAP_SETTING} "
                                                   "changes it")


@dataclass(frozen=True)
class CopyCap:
    """At most `copies` copies run on this host, whatever the instance types say (they are budgets on it)."""

    copies: int
    source: str = ""  # where the number comes from, for messages

    def refusal(self, current: int, delta: int) -> str:
        """Why `delta` more copies on top of `current` are refused ("" when they fit), in the words AWS uses for
        its service quotas."""
        if delta <= 0 or current + delta <= self.copies:
            return ""
        return (f"The host-level limit 'copies per host' is {self.copies} copies ({self.source}), with current "
                f"utilization of {current} copies and a request delta of {delta} copies. Lower CopyCount or "
                "InstanceCount, delete other inference components or endpoints, or raise the limit.")

    def shortfall(self, missing: int, wanted: int) -> str:
        return (f"{missing} of {wanted} copies not started: this host runs at most {self.copies} copies "
                f"({self.source}) and other workloads hold them. Lower CopyCount or InstanceCount, delete other "
                "inference components or endpoints, or raise the limit.")
