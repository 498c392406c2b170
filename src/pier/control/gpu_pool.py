"""Handing this host's GPUs to placed copies: pure, so every case is a row in a table-driven test.

Packing (pier.control.capacity) gives a copy GPUs of its instance; instances are budgets that all land on this
host, so here each copy that owns k of its instance's GPUs gets k of the host's own, never one another copy holds.
A copy keeps the GPUs it had while they are its to keep, so placing one copy never moves another. A copy the host
has too few GPUs left for is refused (its workload fails, with the reason), or, when the operator started pier
with `--cpu-fallback`, runs on CPU and says so: never silently on CPU.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pier.control.capacity import Placement, Shortfall
from pier.control.instance_types import LOCAL, InstanceType, gpus
from pier.control.workload import Workload
from pier.gpus import GpuInventory

# How many GPUs a classic variant's copy uses, from its model's Environment, as TGI's SageMaker entrypoint reads
# them: SM_NUM_GPUS wins over NUM_SHARD. Unset: all of its instance type's GPUs.
GPU_SETTINGS = ("SM_NUM_GPUS", "NUM_SHARD")


@dataclass(frozen=True)
class GpuPool:
    """The GPUs the gateway hands to copies on this host, and what becomes of a copy it has none left for."""

    inventory: GpuInventory | None  # None: the backend gives copies GPUs itself (Ray's num_gpus); none counted here
    cpu_fallback: bool = False  # `pier up --cpu-fallback`: serve such a copy on CPU instead of refusing it


@dataclass(frozen=True)
class Granted:
    placements: tuple[Placement, ...]  # with their host GPUs (or on_cpu); refused copies are left out
    shortfalls: tuple[Shortfall, ...] = ()


def grant(placements: Sequence[Placement], keep: Iterable[Placement], pool: GpuPool,
          flexible: Collection[Workload] = ()) -> Granted:
    """Give every placement that owns GPUs as many of the host's, in the order given, after the copies in `keep`
    that had theirs (and may keep them). A `flexible` workload never asked for GPUs (a classic variant on `local`
    without SM_NUM_GPUS: "this host, whatever it has"): it gets the host's GPUs when they are free, else runs on
    CPU as any copy that wants none."""
    if pool.inventory is None:
        return Granted(tuple(placements))
    before = {_key(p): p for p in keep}
    free = list(pool.inventory.ids)
    done: dict[int, Placement] = {}
    for i, placement in enumerate(placements):
        had = before.get(_key(placement))
        if not placement.accelerators:
            done[i] = dataclasses.replace(placement, devices=(), on_cpu=False)
        elif had is not None and had.devices and set(had.devices) <= set(free):
            free = [d for d in free if d not in had.devices]
            done[i] = dataclasses.replace(placement, devices=had.devices, on_cpu=False)
    refused: dict[Workload, int] = {}
    for i, placement in enumerate(placements):
        if i in done:
            continue
        had = before.get(_key(placement))
        wanted = len(placement.accelerators)
        if len(free) >= wanted and not (pool.cpu_fallback and had is not None and had.on_cpu):
            done[i], free = dataclasses.replace(placement, devices=tuple(free[:wanted]), on_cpu=False), free[wanted:]
        elif placement.workload in flexible:
            done[i] = dataclasses.replace(placement, accelerators=(), devices=(), on_cpu=False)
        elif pool.cpu_fallback:  # a copy already on CPU stays there: moving it would restart it
            done[i] = dataclasses.replace(placement, devices=(), on_cpu=True)
        else:
            refused[placement.workload] = refused.get(placement.workload, 0) + 1
    shortfalls = tuple(Shortfall(w, n, short_of_gpus(_wanted(placements, w), pool.inventory, len(free)))
                       for w, n in refused.items())
    return Granted(tuple(done[i] for i in sorted(done)), shortfalls)


def _key(placement: Placement) -> tuple[str, int, int, tuple[int, ...]]:
    return placement.workload, placement.ordinal, placement.instance, placement.accelerators


def _wanted(placements: Sequence[Placement], workload: Workload) -> int:
    return max(len(p.accelerators) for p in placements if p.workload == workload)


def short_of_gpus(wanted: int, inventory: GpuInventory, free: int) -> str:
    """Why a copy that needs `wanted` GPUs got none, and how to make room, as SageMaker words capacity it lacks."""
    if not inventory.gpus:
        have = "this host has no GPUs"
    elif len(inventory) < wanted:
        have = f"this host has only {inventory.describe()}"
    else:
        have = f"{free} of this host's {inventory.describe()} are free (other copies hold the rest)"
    return (f"Insufficient capacity: each copy needs {gpus(wanted)} of its own and {have}. Lower CopyCount or "
            "NumberOfAcceleratorDevicesRequired (SM_NUM_GPUS for a variant's model), delete inference components or "
            "endpoints that hold GPUs, run pier on a host with more GPUs, or start it with `pier up --cpu-fallback` "
            "to serve such copies on CPU.")


def asks_for_gpus(environment: Mapping[str, str]) -> bool:
    return any(environment.get(name, "").strip() for name in GPU_SETTINGS)


def classic_gpus(environment: Mapping[str, str], itype: InstanceType) -> tuple[int, str]:
    """(GPUs per copy, problem) for a classic variant: SM_NUM_GPUS or NUM_SHARD from its model's Environment, else
    all of the instance type's GPUs. On `local` the host's GPUs decide whether there are enough (see `grant`)."""
    for name in GPU_SETTINGS:
        text = environment.get(name, "").strip()
        if not text:
            continue
        if not text.isdigit() or int(text) < 1:
            return 0, (f"The model's Environment sets {name}={text!r}, which is not a whole number of GPUs of at "
                       f"least 1: set it to the GPUs each copy uses (at most {itype.accelerators} on "
                       f"{itype.name}), or remove it to use all of the instance's.")
        if int(text) > itype.accelerators and itype.name != LOCAL:
            return 0, (f"The model's Environment sets {name}={text}, more GPUs than one {itype.describe()} has: "
                       f"lower {name}, or use an InstanceType with at least {text} GPUs (e.g. ml.g5.12xlarge: 4, "
                       "ml.g5.48xlarge: 8).")
        return int(text), ""
    return itype.accelerators, ""
