"""Instances as Ray capacity, decided without Ray: the bundle an instance reserves, the node it should go to (spread
over nodes), which capacity is missing when none can hold it, and which of a node's cores its copies run on.
Pure, so every rule is a row in a table-driven test.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pier.backends.base import CopySpec, Instance
from pier.backends.ray.config import RayConfig

MIB = 2**20
LOCAL = "local"  # the instance type that is the gateway's host (pier.control.instance_types.LOCAL)
GROUP_PREFIX = "pier-instance-"
ACTOR_PREFIX = "pier-copy-"


@dataclass(frozen=True)
class Node:
    """One node of the cluster as `ray.nodes()` describes it."""

    node_id: str
    address: str
    alive: bool
    resources: Mapping[str, float]  # totals, not what is free now
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reservation:
    """What one instance reserves on the cluster: a placement group of one bundle, on a node with these labels."""

    group: str  # the placement group's name: the same for every copy packed into the instance
    bundle: Mapping[str, float]
    labels: Mapping[str, str]

    def describe(self) -> str:
        return describe(self.bundle) + (f" on a node labelled {dict(self.labels)}" if self.labels else "")


def instance_of(spec: CopySpec) -> Instance:
    """The instance the copy is packed into; a copy placed by no variant is an instance of its own size."""
    if spec.instance is not None:
        return spec.instance
    vcpus = max(1, len(spec.cores))
    return Instance(spec.component, 0, "copy", vcpus, spec.memory_mb, spec.accelerators, tuple(range(vcpus)))


def reservation(spec: CopySpec, config: RayConfig) -> Reservation:
    instance = instance_of(spec)
    mapped = config.instance_types.get(instance.type)
    bundle = dict(mapped.resources) if mapped and mapped.resources is not None else _sized(instance, config)
    for name, amount in config.resources.items():
        bundle[name] = bundle.get(name, 0.0) + amount
    if not bundle:
        bundle = {"CPU": 0.01}  # Ray wants something in a bundle; everything was configured away
    labels = dict(mapped.labels) if mapped else {}
    digest = hashlib.sha256(json.dumps([instance.type, sorted(bundle.items()), sorted(labels.items())]).encode())
    if spec.instance is None:
        group = f"{GROUP_PREFIX}copy-{spec.copy_id}"
    else:
        group = f"{GROUP_PREFIX}{slug(instance.variant)}-{instance.index}-{digest.hexdigest()[:8]}"
    return Reservation(group, bundle, labels)


def _sized(instance: Instance, config: RayConfig) -> dict[str, float]:
    """The default: a real instance of the type (its vCPUs, memory and accelerators), scaled by the config. The
    type `local` (the gateway's host as one instance) reserves its cores only: no node offers Ray all of its
    memory, so a host's whole memory would never fit one."""
    bundle: dict[str, float] = {}
    if instance.vcpus and config.cpus_per_vcpu:
        bundle["CPU"] = instance.vcpus * config.cpus_per_vcpu
    if config.memory and instance.memory_mb and instance.type != LOCAL:
        bundle["memory"] = float(instance.memory_mb * MIB)
    if instance.accelerators and config.gpus_per_accelerator:
        bundle["GPU"] = instance.accelerators * config.gpus_per_accelerator
    return bundle


def slug(name: str) -> str:
    """A name as it may stand in an actor's or a placement group's name."""
    return re.sub(r"[^a-zA-Z0-9]+", "-", name).strip("-").lower() or "x"


def actor_name(copy_id: str) -> str:
    return ACTOR_PREFIX + copy_id


def fits(bundle: Mapping[str, float], resources: Mapping[str, float]) -> bool:
    return all(resources.get(name, 0.0) + 1e-9 >= amount for name, amount in bundle.items())


def labelled(labels: Mapping[str, str], node: Node) -> bool:
    """Plain `key: value` labels must match; Ray's operators (`!v`, `in(a,b)`) are left for Ray to judge."""
    return all(node.labels.get(key) == value for key, value in labels.items()
               if not value.startswith("!") and "(" not in value)


def choose_node(wanted: Reservation, nodes: Sequence[Node], same_variant: Mapping[str, int],
                ours: Mapping[str, int]) -> str | None:
    """The node an instance should go to: one that could hold it, with the fewest instances of the same variant
    (spread), then the fewest of pier's (balance). None when no node could ever hold it."""
    candidates = [n for n in nodes if n.alive and fits(wanted.bundle, n.resources) and labelled(wanted.labels, n)]
    if not candidates:
        return None
    best = min(candidates, key=lambda n: (same_variant.get(n.node_id, 0), ours.get(n.node_id, 0), n.node_id))
    return best.node_id


def missing_capacity(wanted: Reservation, nodes: Sequence[Node], instance: Instance) -> str:
    """Why the instance waits, in words a user can act on."""
    alive = [n for n in nodes if n.alive]
    what = (f"instance {instance.index} of {instance.variant} ({instance.type}) needs {wanted.describe()}"
            if instance.type != "copy" else f"the copy needs {wanted.describe()}")
    fix = ("A Ray autoscaler adds such nodes where one runs; else add nodes, map the instance type to what the "
           "nodes have (pier up --ray-config: instance_types, cpus_per_vcpu), or use a smaller InstanceType.")
    if not alive:
        return f"Waiting for capacity: {what}, and the Ray cluster has no live node. {fix}"
    if any(fits(wanted.bundle, n.resources) and labelled(wanted.labels, n) for n in alive):
        return (f"Waiting for capacity: {what}; the nodes that could hold it are busy with other instances. "
                f"Free one (delete or scale down endpoints) or add nodes. {fix}")
    largest = max(alive, key=lambda n: sum(n.resources.get(k, 0.0) / v for k, v in wanted.bundle.items() if v))
    return (f"Waiting for capacity: {what}, more than any of the cluster's {len(alive)} live node(s) has (the "
            f"closest has {describe({k: largest.resources.get(k, 0.0) for k in wanted.bundle})}). {fix}")


def describe(resources: Mapping[str, float]) -> str:
    parts = []
    for name, amount in sorted(resources.items()):
        if name == "memory":
            parts.append(f"{amount / MIB:.0f} MiB of memory")
        else:
            parts.append(f"{amount:g} {name}")
    return ", ".join(parts) or "nothing"


def instance_index(group: str, node_id: str, placed: Mapping[str, str]) -> int:
    """The instance's number among pier's instances on its node (by name), so instances sharing a node run on
    different cores. `placed` maps each group to its node."""
    here = sorted(name for name, node in placed.items() if node == node_id)
    return here.index(group) if group in here else len(here)


def node_cores(index: int, instance: Instance, cores: Sequence[int]) -> tuple[int, ...]:
    """The node's cores the copy's vCPUs run on, mapped as the local backend maps them onto the host: vCPU j of
    the node's instance number `index` is core (index * vcpus + j) modulo the cores the copy may use."""
    if not cores:
        return ()
    owned = instance.owned or tuple(range(instance.vcpus))
    base = index * instance.vcpus
    return tuple(sorted({cores[(base + v) % len(cores)] for v in owned}))
