"""The copies the stored state asks for: every variant's instances, what is packed on them, and the
CopySpec of each copy, with its own host cores. Pure given its inputs (the weights' sizes come in as a
function), so the reconciler's decisions can be tested without files or processes.

A copy's id is its workload, its ordinal and a hash of everything that makes it what it is (model folder,
environment, cores, memory), so it is the same after a gateway restart, and a changed spec means a new copy
(started beside the old one, which keeps serving until the new one is ready). This host's GPUs are handed to
the copies that own some of their instance's here (pier.control.gpu_pool), across every endpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pier.backends.base import CopySpec, Instance
from pier.control import capacity, gpu_pool, rollout
from pier.control.capacity import CopyCap, Demand, Placement
from pier.control.gpu_pool import GpuPool
from pier.control.instance_types import LOCAL, InstanceType, host_cores_for
from pier.control.multi_model_environment import multi_model_environment
from pier.control.records import ComponentRecord, EndpointRecord, VariantRecord
from pier.control.shapes import ResourceRequirements
from pier.control.workload import Workload


@dataclass(frozen=True)
class Desired:
    specs: tuple[CopySpec, ...] = ()
    placements: tuple[Placement, ...] = ()  # where the copies went, to keep them there next time
    problems: dict[Workload, str] = field(default_factory=dict)  # workload -> why some copies could not be placed


def desired_copies(endpoints: Iterable[EndpointRecord], components: Iterable[ComponentRecord],
                   keep: Sequence[Placement], host: tuple[int, ...], lookup: Callable[[str], InstanceType],
                   cap: CopyCap | None = None, running: Collection[str] = (),
                   failed: Collection[str] = (), gpus: GpuPool | None = None) -> Desired:
    """Every copy the records ask for, at most `cap.copies` of them that run: copies in `running` first, then in
    the order the endpoints and components were made (a newer workload never pushes an older one's copies out).
    Copies in `failed` (the backend gave up on them: no process) stay wanted, so their workload stays Failed with
    why, but hold none of the cap. `gpus`: this host's GPUs, handed to the copies that want some (None: the
    backend gives them GPUs itself)."""
    endpoints, components = list(endpoints), list(components)
    wanted = _uncapped(endpoints, components, keep, host, lookup, gpus or GpuPool(None))
    pairs = list(zip(wanted.specs, wanted.placements, strict=True))
    live = [p for p in pairs if p[0].copy_id not in failed]
    if cap is None or len(live) <= cap.copies:
        return wanted
    made = {Workload.of_component(c.name): c.created for c in components}
    made |= {v.workload(e.name): e.created for e in endpoints for v in e.fleet_variants}
    live.sort(key=lambda p: (p[0].copy_id not in running, made.get(Workload(p[0].component), 0.0)))
    kept = live[: cap.copies] + [p for p in pairs if p[0].copy_id in failed]
    dropped = live[cap.copies :]
    problems = dict(wanted.problems)
    for workload in dict.fromkeys(spec.component for spec, _ in dropped):
        missing = sum(1 for spec, _ in dropped if spec.component == workload)
        total = sum(1 for spec in wanted.specs if spec.component == workload)
        problems.setdefault(Workload(workload), cap.shortfall(missing, total))
    order = {spec.copy_id: i for i, spec in enumerate(wanted.specs)}
    kept.sort(key=lambda p: order[p[0].copy_id])
    return Desired(tuple(s for s, _ in kept), tuple(p for _, p in kept), problems)


@dataclass(frozen=True)
class _Copy:
    """A placed copy, before this host's GPUs are handed out: what its CopySpec is made of."""

    placement: Placement
    owner: Workload  # the variant whose instance it is packed into
    itype: InstanceType
    model_dir: Path
    environment: dict[str, str]
    memory_mb: int


@dataclass
class _Placed:
    copies: list[_Copy] = field(default_factory=list)
    wanted: dict[Workload, int] = field(default_factory=dict)  # copies each workload asks for
    flexible: set[Workload] = field(default_factory=set)  # GPUs when free, else CPU (gpu_pool.grant)
    problems: dict[Workload, str] = field(default_factory=dict)


def _uncapped(endpoints: Iterable[EndpointRecord], components: Iterable[ComponentRecord], keep: Sequence[Placement],
              host: tuple[int, ...], lookup: Callable[[str], InstanceType], pool: GpuPool) -> Desired:
    by_variant: dict[tuple[str, str], list[ComponentRecord]] = {}
    for component in components:
        if component.status != "Deleting" and component.specification.BaseInferenceComponentName is None:
            by_variant.setdefault((component.endpoint.lower(), component.variant), []).append(component)
    placed = _Placed()
    for endpoint in endpoints:
        if endpoint.status == "Deleting":
            continue
        for variant in endpoint.fleet_variants:
            itype = _counted(lookup(variant.instance_type), pool)
            owner = variant.workload(endpoint.name)
            if variant.model is not None:
                _classic(placed, owner, variant, itype)
            else:
                hosted = by_variant.get((endpoint.name.lower(), variant.name), [])
                _components(placed, owner, hosted, variant, itype, keep)
    granted = gpu_pool.grant([c.placement for c in placed.copies], keep, pool, placed.flexible)
    for short in granted.shortfalls:
        placed.problems.setdefault(short.workload, f"{short.missing} of {placed.wanted[short.workload]} copies not "
                                                   f"placed. {short.reason}")
    by_key = {(c.placement.workload, c.placement.ordinal): c for c in placed.copies}
    specs = [_spec(p, by_key[(p.workload, p.ordinal)], host) for p in granted.placements]
    return Desired(tuple(specs), granted.placements, placed.problems)


def _counted(itype: InstanceType, pool: GpuPool) -> InstanceType:
    """`local` is this host: its GPUs are the ones handed out here (the pool's, should they differ from discovery)."""
    if itype.name != LOCAL or pool.inventory is None:
        return itype
    return dataclasses.replace(itype, accelerators=len(pool.inventory))


def _classic(placed: _Placed, workload: Workload, variant: VariantRecord, itype: InstanceType) -> None:
    if variant.model_dir is None or variant.container is None:
        return  # its model is still being fetched
    environment = variant.container.Environment
    gpus, problem = gpu_pool.classic_gpus(environment, itype)
    placed.wanted[workload] = variant.instance_count
    if itype.name == LOCAL and not gpu_pool.asks_for_gpus(environment):
        placed.flexible.add(workload)
    if problem:
        placed.problems[workload] = problem
        return
    for placement in capacity.whole_instances(workload, itype, variant.instance_count, gpus):
        placed.copies.append(_Copy(placement, workload, itype, Path(variant.model_dir),
                                   multi_model_environment(variant.container, itype.memory_mb), itype.memory_mb))


def _components(placed: _Placed, owner: Workload, hosted: list[ComponentRecord], variant: VariantRecord,
                itype: InstanceType, keep: Sequence[Placement]) -> None:
    ready = [c for c in hosted if _fetched(c) is not None]
    demands = [_demand(c) for c in ready]
    packing = capacity.pack(itype, variant.instance_count, demands, keep)
    records = {Workload.of_component(c.name): c for c in ready}
    placed.wanted.update({name: record.copies for name, record in records.items()})
    for placement in packing.placements:
        component = records[placement.workload]
        if rollout.on_new(component, placement.ordinal):
            model_dir, spec, container = component.model_dir, component.specification, component.container
        else:  # a rolling update has not reached this copy yet
            assert component.rollout is not None
            old = component.rollout
            model_dir, spec, container = old.model_dir, old.specification, old.container
        placed.copies.append(_Copy(placement, owner, itype, Path(model_dir or ""), container.Environment,
                                   spec.resources.MinMemoryRequiredInMb))
    placed.problems.update({s.workload: f"{s.missing} of {records[s.workload].copies} copies not placed. {s.reason}"
                            for s in packing.shortfalls})


def _fetched(component: ComponentRecord) -> tuple[str, int] | None:
    """The model folder and weights' size its copies are packed by: its own once fetched, else (during a rolling
    update) the old specification's, which its copies still run; None: nothing to run yet."""
    if component.model_dir is not None and component.weights_mb is not None:
        return component.model_dir, component.weights_mb
    old = component.rollout
    if old is not None and old.model_dir is not None and old.weights_mb is not None:
        return old.model_dir, old.weights_mb
    return None


def _demand(component: ComponentRecord) -> Demand:
    """What the component's copies need; the weights' size was measured off the event loop, when the model's
    files were fetched (walking a folder here would hold up the gateway)."""
    model_dir, weights_mb = _fetched(component) or ("", 0)
    return demand_of(Workload.of_component(component.name), component.specification.resources, component.copies,
                     model_dir, weights_mb)


def demand_of(workload: Workload, resources: ResourceRequirements, copies: int, weights: str = "",
              weights_mb: int = 0) -> Demand:
    """A component's requirements as packing reads them: whole cores and devices, rounded up."""
    return Demand(
        workload=workload,
        copies=copies,
        cores=math.ceil(resources.NumberOfCpuCoresRequired or 0),
        memory_mb=resources.MinMemoryRequiredInMb,
        accelerators=math.ceil(resources.NumberOfAcceleratorDevicesRequired or 0),
        weights=weights,
        weights_mb=weights_mb,
    )


def _spec(placement: Placement, copy: _Copy, host: tuple[int, ...]) -> CopySpec:
    itype = copy.itype
    # A copy that reserved no cores shares all of its instance's.
    vcpus = placement.vcpus or tuple(range(itype.vcpus))
    cores = host_cores_for(placement.instance, vcpus, itype, host)
    # The instance (number and type) is part of what a copy is: on the ray backend it is where the copy runs. So are
    # the host's GPUs it holds: other GPUs make another copy, started beside it.
    identity = [placement.workload, str(copy.model_dir), sorted(copy.environment.items()), cores, copy.memory_mb,
                len(placement.accelerators), placement.instance, itype.name, vcpus]
    if placement.devices or placement.on_cpu:
        identity += [placement.devices, placement.on_cpu]
    digest = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:8]
    return CopySpec(
        copy_id=f"{placement.workload.slug}-{placement.ordinal}-{digest}",
        component=placement.workload,
        model_dir=copy.model_dir,
        environment=dict(copy.environment),
        cores=cores,
        memory_mb=copy.memory_mb,
        accelerators=len(placement.accelerators),
        gpus=tuple(str(d) for d in placement.devices),
        cpu_fallback=placement.on_cpu,
        instance=Instance(copy.owner, placement.instance, itype.name, itype.vcpus, itype.memory_mb, itype.accelerators,
                          vcpus),
    )
