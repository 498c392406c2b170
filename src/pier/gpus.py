"""The GPUs of this host, as placement counts them: NVML (`pip install 'pier[gpu]'`, which brings nvidia-ml-py)
when it is importable, else `nvidia-smi`, else none. `PIER_FAKE_GPUS=N` stands in N fake GPUs instead, for
placement's tests and demos on a host without any: copies are handed ids 0..N-1 that no driver backs, and a real
copy handed one refuses to load (the engine never runs a copy that holds GPUs on the CPU), so fakes show placement
(/pier/gpus, /pier/copies, refusals), not serving. The gateway's own CUDA_VISIBLE_DEVICES, when set, limits pier
to the GPUs it names.

Ids are the driver's indexes in PCI bus order (what nvidia-smi shows); a copy is started with
CUDA_DEVICE_ORDER=PCI_BUS_ID so that CUDA numbers them the same way.
"""

from __future__ import annotations

import importlib
import logging
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from pier.env import Env, integer

log = logging.getLogger("pier.gpus")

FAKE_SETTING = "PIER_FAKE_GPUS"
FAKE_NAME = "Fake GPU (PIER_FAKE_GPUS)"
FAKE_MEMORY_MB = 24576  # an A10G's, the GPU of ml.g5: what the fake stands in for
SMI_QUERY = ["nvidia-smi", "--query-gpu=index,name,memory.total,uuid", "--format=csv,noheader,nounits"]


@dataclass(frozen=True)
class Gpu:
    id: int  # the index CUDA_VISIBLE_DEVICES names it by
    name: str
    memory_mb: int
    uuid: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "memory_mb": self.memory_mb, "uuid": self.uuid}


@dataclass(frozen=True)
class GpuInventory:
    """The GPUs pier may hand to copies on this host, and where that list came from."""

    gpus: tuple[Gpu, ...] = ()
    source: str = "none"  # nvml, nvidia-smi, PIER_FAKE_GPUS, or none

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(g.id for g in self.gpus)

    def __len__(self) -> int:
        return len(self.gpus)

    def describe(self) -> str:
        """`4 x NVIDIA A10G (24576 MiB)`, or `no GPUs`, for messages and logs."""
        if not self.gpus:
            return "no GPUs"
        kinds = {(g.name, g.memory_mb) for g in self.gpus}
        if len(kinds) == 1:
            name, memory = next(iter(kinds))
            return f"{len(self.gpus)} x {name} ({memory} MiB)"
        return ", ".join(f"{g.id}: {g.name} ({g.memory_mb} MiB)" for g in self.gpus)

    def to_json(self) -> dict[str, Any]:
        return {"count": len(self.gpus), "source": self.source, "gpus": [g.to_json() for g in self.gpus]}


def fake(count: int) -> GpuInventory:
    return GpuInventory(tuple(Gpu(i, FAKE_NAME, FAKE_MEMORY_MB, f"GPU-fake-{i}") for i in range(count)), FAKE_SETTING)


def parse_smi(text: str) -> tuple[Gpu, ...]:
    """nvidia-smi's CSV rows (`index, name, memory.total, uuid`; the memory with or without its ` MiB`)."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        index, *middle, memory, uuid = (field.strip() for field in line.split(","))
        gpus.append(Gpu(int(index), ", ".join(middle), int(float(memory.removesuffix("MiB").strip())), uuid))
    return tuple(gpus)


def from_nvml(nvml: Any) -> GpuInventory:
    """Through NVML (the `pynvml` module of nvidia-ml-py); raises the module's NVMLError when there is no driver."""
    nvml.nvmlInit()
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(Gpu(index, _text(nvml.nvmlDeviceGetName(handle)),
                            int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // 2**20,
                            _text(nvml.nvmlDeviceGetUUID(handle))))
        return GpuInventory(tuple(gpus), "nvml")
    finally:
        nvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def from_smi(run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run) -> GpuInventory:
    done = run(SMI_QUERY, capture_output=True, text=True, timeout=20, check=True)
    return GpuInventory(parse_smi(done.stdout), "nvidia-smi")


def visible(inventory: GpuInventory, setting: str | None) -> GpuInventory:
    """The GPUs that the gateway's own CUDA_VISIBLE_DEVICES (`setting`; None: unset) leaves it: indexes or UUIDs
    (or their prefixes), as CUDA reads them; CUDA stops at the first name that matches no GPU."""
    if setting is None:
        return inventory
    kept: list[Gpu] = []
    for name in (part.strip() for part in setting.split(",")):
        match = next((g for g in inventory.gpus if (name.isdigit() and g.id == int(name))
                      or (name.startswith("GPU-") and g.uuid.startswith(name))), None)
        if match is None:
            break
        if match not in kept:
            kept.append(match)
    return GpuInventory(tuple(kept), inventory.source)


def discover(env: Mapping[str, str] | None = None) -> GpuInventory:
    """This host's GPUs: PIER_FAKE_GPUS when set, else what the driver reports (looked up once per process)."""
    read = Env(env)
    count = read.get(FAKE_SETTING, cast=integer(low=0), problem=(
        "{name}={raw!r} is not a whole number of GPUs; set it to e.g. 4 (fake GPUs for tests and demos) or 0 (none), "
        "or unset it to use the host's real GPUs."))
    if count is not None:
        return fake(count)
    return visible(_driver(), read.values.get("CUDA_VISIBLE_DEVICES"))  # set but empty: no GPU, as CUDA reads it


@cache
def _driver() -> GpuInventory:
    try:
        nvml = importlib.import_module("pynvml")
    except ImportError:
        nvml = None
    if nvml is not None:
        try:
            return from_nvml(nvml)
        except Exception as error:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: a host without a driver
            log.debug("NVML found no GPUs: %s", error)
    if shutil.which("nvidia-smi"):
        try:
            return from_smi()
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            log.warning("nvidia-smi could not list this host's GPUs (%s); pier places copies on no GPU", error)
    return GpuInventory()


def gpu_build_advice(inventory: GpuInventory) -> str | None:
    """How to get a llama.cpp build that uses this host's real GPUs, when the installed one cannot; None otherwise
    (and on a host without real GPUs, where llama.cpp is not even loaded to ask)."""
    if not inventory.gpus or inventory.source == FAKE_SETTING:
        return None
    from pier.engine.devices import cpu_build_hint  # loads llama.cpp: only where there are GPUs to use

    return cpu_build_hint(host_has_gpus=True)
