"""The copies the stored state asks for: every variant's instances, what is packed on them, and the
CopySpec of each copy, with its own host cores. Pure given its inputs (the weights' sizes come in as a
function), so the reconciler's decisions can be tested without files or processes.

A copy's id is its workload, its ordinal and a hash of everything that makes it what it is (model folder,
environment, cores, memory), so it is the same after a gateway restart, and a changed spec means a new copy
(started beside the old one, which keeps serving until the new one is ready).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pier.backends.base import CopySpec, Instance
from pier.control import capacity
from pier.control.capacity import CopyCap, Demand, Placement
from pier.control.instance_types import InstanceType, host_cores_for
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
                   failed: Collection[str] = ()) -> Desired:
    """Every copy the records ask for, at most `cap.copies` of them that run: copies in `running` first, then in
    the order the endpoints and components were made (a newer workload never pushes an older one's copies out).
    Copies in `failed` (the backend gave up on them: no process) stay wanted, so their workload stays Failed with
    why, but hold none of the cap."""
    endpoints, components = list(endpoints), list(components)
    wanted = _uncapped(endpoints, components, keep, host, lookup)
    pairs = list(zip(wanted.specs, wanted.placements, strict=True))
    live = [p for p in pairs if p[0].copy_id not in failed]
    if cap is None or len(live) <= cap.copies:
        return wanted
    made = {Workload.of_component(c.name): c.created for c in components}
    made |= {Workload.of_variant(e.name, v.name): e.created for e in endpoints for v in e.variants}
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


def _uncapped(endpoints: Iterable[EndpointRecord], components: Iterable[ComponentRecord], keep: Sequence[Placement],
              host: tuple[int, ...], lookup: Callable[[str], InstanceType]) -> Desired:
    by_variant: dict[tuple[str, str], list[ComponentRecord]] = {}
    for component in components:
        if component.status != "Deleting":
            by_variant.setdefault((component.endpoint.lower(), component.variant), []).append(component)
    specs: list[CopySpec] = []
    placements: list[Placement] = []
    problems: dict[Workload, str] = {}
    for endpoint in endpoints:
        if endpoint.status == "Deleting":
            continue
        for variant in endpoint.variants:
            itype = lookup(variant.instance_type)
            owner = Workload.of_variant(endpoint.name, variant.name)
            if variant.model is not None:
                placed = _classic(owner, variant, itype, host)
            else:
                hosted = by_variant.get((endpoint.name.lower(), variant.name), [])
                placed = _components(owner, hosted, variant, itype, keep, host)
            specs += placed.specs
            placements += placed.placements
            problems.update(placed.problems)
    return Desired(tuple(specs), tuple(placements), problems)


def _classic(workload: Workload, variant: VariantRecord, itype: InstanceType, host: tuple[int, ...]) -> Desired:
    if variant.model_dir is None or variant.container is None:
        return Desired()  # its model is still being fetched
    placements = capacity.whole_instances(workload, itype, variant.instance_count)
    environment = variant.container.Environment
    specs = [_spec(s, workload, itype, host, Path(variant.model_dir), environment, itype.memory_mb)
             for s in placements]
    return Desired(tuple(specs), placements)


def _components(owner: Workload, hosted: list[ComponentRecord], variant: VariantRecord, itype: InstanceType,
                keep: Sequence[Placement], host: tuple[int, ...]) -> Desired:
    ready = [c for c in hosted if c.model_dir is not None and c.weights_mb is not None]
    demands = [_demand(c) for c in ready]
    packing = capacity.pack(itype, variant.instance_count, demands, keep)
    records = {Workload.of_component(c.name): c for c in ready}
    specs = []
    for placement in packing.placements:
        component = records[placement.workload]
        memory = component.specification.resources.MinMemoryRequiredInMb
        model_dir = Path(component.model_dir or "")
        specs.append(_spec(placement, owner, itype, host, model_dir, component.container.Environment, memory))
    problems = {s.workload: f"{s.missing} of {records[s.workload].copies} copies not placed. {s.reason}"
                for s in packing.shortfalls}
    return Desired(tuple(specs), packing.placements, problems)


def _demand(component: ComponentRecord) -> Demand:
    """What the component's copies need; the weights' size was measured off the event loop, when the model's
    files were fetched (walking a folder here would hold up the gateway)."""
    return demand_of(Workload.of_component(component.name), component.specification.resources, component.copies,
                     component.model_dir or "", component.weights_mb or 0)


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


def _spec(placement: Placement, owner: Workload, itype: InstanceType, host: tuple[int, ...], model_dir: Path,
          environment: dict[str, str], memory_mb: int) -> CopySpec:
    # A copy that reserved no cores shares all of its instance's.
    vcpus = placement.vcpus or tuple(range(itype.vcpus))
    cores = host_cores_for(placement.instance, vcpus, itype, host)
    # The instance (number and type) is part of what a copy is: on the ray backend it is where the copy runs.
    identity = json.dumps([placement.workload, str(model_dir), sorted(environment.items()), cores, memory_mb,
                           len(placement.accelerators), placement.instance, itype.name, vcpus])
    digest = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return CopySpec(
        copy_id=f"{placement.workload.slug}-{placement.ordinal}-{digest}",
        component=placement.workload,
        model_dir=model_dir,
        environment=dict(environment),
        cores=cores,
        memory_mb=memory_mb,
        accelerators=len(placement.accelerators),
        instance=Instance(owner, placement.instance, itype.name, itype.vcpus, itype.memory_mb, itype.accelerators,
                          vcpus),
    )
