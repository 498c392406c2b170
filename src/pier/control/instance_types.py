"""SageMaker instance types as units of capacity, and how an instance's vCPUs land on this host's cores.

pier runs every instance of an endpoint on this host (the local backend), so an instance type is a budget:
the copies packed into one instance get distinct vCPUs of it, and vCPU j of instance i is host core
number (i * vcpus + j) modulo the cores this process may use.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache

from pier.control.errors import ValidationError
from pier.gpus import discover

log = logging.getLogger("pier.control")

LOCAL = "local"


@dataclass(frozen=True)
class InstanceType:
    name: str
    vcpus: int
    memory_mb: int
    accelerators: int = 0

    def describe(self) -> str:
        return f"{self.name} ({self.vcpus} vCPUs, {self.memory_mb} MiB, {gpus(self.accelerators)})"


def gpus(count: int) -> str:
    """`1 GPU`, `4 GPUs`: accelerators are GPUs on every instance type pier knows."""
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


# CPU families: size -> vCPUs follows AWS's naming (medium 1, large 2, xlarge 4, Nxlarge 4N); memory is a
# fixed number of GiB per vCPU for the family (c: 2, m: 4, r: 8).
_CPU_FAMILIES: dict[str, tuple[str, ...]] = {
    "c5": ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "18xlarge"),
    "c6i": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"),
    "c6g": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
    "c7g": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
    "c7i": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"),
    "m5": ("large", "xlarge", "2xlarge", "4xlarge", "12xlarge", "24xlarge"),
    "m6i": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"),
    "m6g": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
    # m7g is no SageMaker hosting type (botocore's enum lacks it); kept as a size Graviton users know.
    "m7g": ("medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
    "m7i": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"),
    "r6g": ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"),
}
_GIB_PER_VCPU = {"c": 2, "m": 4, "r": 8}

# GPU families do not follow one rule: (vCPUs, GiB, GPUs) per size.
_GPU_TYPES: dict[str, tuple[int, int, int]] = {
    "ml.g4dn.xlarge": (4, 16, 1), "ml.g4dn.2xlarge": (8, 32, 1), "ml.g4dn.4xlarge": (16, 64, 1),
    "ml.g4dn.8xlarge": (32, 128, 1), "ml.g4dn.12xlarge": (48, 192, 4), "ml.g4dn.16xlarge": (64, 256, 1),
    "ml.g5.xlarge": (4, 16, 1), "ml.g5.2xlarge": (8, 32, 1), "ml.g5.4xlarge": (16, 64, 1),
    "ml.g5.8xlarge": (32, 128, 1), "ml.g5.12xlarge": (48, 192, 4), "ml.g5.16xlarge": (64, 256, 1),
    "ml.g5.24xlarge": (96, 384, 4), "ml.g5.48xlarge": (192, 768, 8),
    "ml.g6.xlarge": (4, 16, 1), "ml.g6.2xlarge": (8, 32, 1), "ml.g6.4xlarge": (16, 64, 1),
    "ml.g6.8xlarge": (32, 128, 1), "ml.g6.12xlarge": (48, 192, 4), "ml.g6.16xlarge": (64, 256, 1),
    "ml.g6.24xlarge": (96, 384, 4), "ml.g6.48xlarge": (192, 768, 8),
    "ml.p4d.24xlarge": (96, 1152, 8),
    "ml.p5.48xlarge": (192, 2048, 8),
}


def _size_vcpus(size: str) -> int:
    if size == "medium":
        return 1
    if size == "large":
        return 2
    multiple = size.removesuffix("xlarge")
    return 4 * (int(multiple) if multiple else 1)


@cache
def catalogue() -> dict[str, InstanceType]:
    """Every instance type pier knows except `local`, by name."""
    types: dict[str, InstanceType] = {}
    for family, sizes in _CPU_FAMILIES.items():
        for size in sizes:
            name = f"ml.{family}.{size}"
            vcpus = _size_vcpus(size)
            types[name] = InstanceType(name, vcpus, vcpus * _GIB_PER_VCPU[family[0]] * 1024)
    for name, (vcpus, gib, gpus) in _GPU_TYPES.items():
        types[name] = InstanceType(name, vcpus, gib * 1024, gpus)
    return types


def host_cores() -> tuple[int, ...]:
    """The CPU ids this process may run on (a container or taskset may give it fewer than the machine has)."""
    return tuple(sorted(os.sched_getaffinity(0)))


def host_memory_mb() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20


def local_instance() -> InstanceType:
    """This host as one instance: its cores, its memory and its GPUs (pier.gpus; PIER_FAKE_GPUS stands in fakes)."""
    return InstanceType(LOCAL, len(host_cores()), host_memory_mb(), _gpu_count())


@cache
def _gpu_count() -> int:
    """This host's GPUs, discovered once per process: a request naming ml.local reads no setting."""
    return len(discover())


def lookup(name: str) -> InstanceType:
    """The instance type called `name`, or a ValidationException that lists what pier knows."""
    if name == LOCAL:
        return local_instance()
    found = catalogue().get(name)
    if found is None:
        families = sorted({n.split(".")[1] for n in catalogue()})
        raise ValidationError(
            f"Unknown InstanceType {name!r}. Use 'local' (this host) or an ml.* type of a family pier knows "
            f"({', '.join(families)}), e.g. 'ml.c7g.xlarge'."
        )
    return found


def host_cores_for(instance: int, vcpus: tuple[int, ...], itype: InstanceType,
                   host: tuple[int, ...]) -> tuple[int, ...]:
    """The host cores that vCPUs `vcpus` of instance number `instance` run on."""
    base = instance * itype.vcpus
    return tuple(sorted({host[(base + v) % len(host)] for v in vcpus}))


def oversize_warning(itype: InstanceType, host: tuple[int, ...], memory_mb: int) -> str | None:
    """Words for the user when one instance of `itype` is more than this host has: its copies will share cores
    (slower than on the real instance) or may not fit in memory."""
    has, gives, effects = [], [], []
    if itype.vcpus > len(host):
        has.append(f"{itype.vcpus} vCPUs")
        gives.append(f"{len(host)} cores")
        effects.append(f"will share cores and run slower than on a real {itype.name}")
    if itype.memory_mb > memory_mb:
        has.append(f"{itype.memory_mb} MiB of memory")
        gives.append(f"{memory_mb} MiB")
        effects.append("may not all fit in memory")
    if not has:
        return None
    return (f"{itype.name} has {' and '.join(has)}; this host gives pier {' and '.join(gives)}: its copies "
            f"{', and '.join(effects)}. Use InstanceType 'local' (this host as one instance) or a smaller type.")


def warn_if_oversize(itype: InstanceType) -> str | None:
    warning = oversize_warning(itype, host_cores(), host_memory_mb())
    if warning:
        log.warning("%s", warning)
    return warning
