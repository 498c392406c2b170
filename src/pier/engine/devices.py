"""The compute devices llama.cpp sees in this process: its CPU, and the GPUs of whatever backend it was built with
(CUDA, Metal, Vulkan, ROCm), read through ggml's device registry.

llama-cpp-python binds llama.h but not ggml-backend.h, so the handful of ggml calls are declared here; they live in
libggml-base, which libllama loads, so they resolve through llama-cpp-python's own library handle (and through
LLAMA_CPP_LIB_PATH's build when one is named).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
from llama_cpp import llama_cpp as _bindings

# ggml_backend_dev_type
_KINDS = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
# What a CUDA build takes: llama-cpp-python compiles llama.cpp with CMAKE_ARGS (Metal is on by default on macOS).
GPU_BUILD_COMMAND = ('CMAKE_ARGS="-DGGML_CUDA=on" python3 -m pip install --no-cache-dir --force-reinstall --no-deps '
                     '"llama-cpp-python==0.3.36"')


@dataclass(frozen=True)
class Device:
    """One of llama.cpp's devices: `name` is llama.cpp's own ("CUDA0", "CPU"), `description` the hardware's."""

    name: str
    description: str
    kind: str  # cpu, gpu, igpu (a GPU sharing host memory) or accel
    free_bytes: int
    total_bytes: int

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("gpu", "igpu")

    def shown(self) -> str:
        if not self.is_gpu:
            return self.name
        return f"{self.name} ({self.description}, {self.total_bytes / 2**30:.1f} GiB)"


def _declare() -> ctypes.CDLL:
    lib = _bindings._lib
    lib.ggml_backend_dev_count.argtypes, lib.ggml_backend_dev_count.restype = [], ctypes.c_size_t
    lib.ggml_backend_dev_get.argtypes, lib.ggml_backend_dev_get.restype = [ctypes.c_size_t], ctypes.c_void_p
    for name in ("ggml_backend_dev_name", "ggml_backend_dev_description"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [ctypes.c_void_p], ctypes.c_char_p
    lib.ggml_backend_dev_type.argtypes, lib.ggml_backend_dev_type.restype = [ctypes.c_void_p], ctypes.c_int
    size_p = ctypes.POINTER(ctypes.c_size_t)
    lib.ggml_backend_dev_memory.argtypes, lib.ggml_backend_dev_memory.restype = [ctypes.c_void_p, size_p, size_p], None
    return lib


def device_handles() -> list[tuple[int, Device]]:
    """Every device llama.cpp registered, with its ggml handle (for llama_model_params.devices)."""
    llama_cpp.llama_backend_init()  # registers the backends; repeated calls do nothing
    lib = _declare()
    found = []
    for index in range(lib.ggml_backend_dev_count()):
        handle = lib.ggml_backend_dev_get(index)
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        lib.ggml_backend_dev_memory(handle, ctypes.byref(free), ctypes.byref(total))
        found.append((handle, Device(
            name=lib.ggml_backend_dev_name(handle).decode(),
            description=lib.ggml_backend_dev_description(handle).decode(),
            kind=_KINDS.get(lib.ggml_backend_dev_type(handle), "accel"),
            free_bytes=free.value, total_bytes=total.value,
        )))
    return found


def gpus() -> list[Device]:
    """The GPUs llama.cpp can offload to in this process (none in a CPU-only build, or when CUDA_VISIBLE_DEVICES
    hides them)."""
    return [device for _, device in device_handles() if device.is_gpu]


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build has a GPU backend at all."""
    return bool(llama_cpp.llama_supports_gpu_offload())


def host_has_nvidia_gpus(proc: Path = Path("/proc/driver/nvidia/gpus"), dev: Path = Path("/dev")) -> bool:
    """NVIDIA's driver is loaded and shows a GPU: then a CPU-only build leaves it idle."""
    if proc.is_dir() and any(proc.iterdir()):
        return True
    return any(dev.glob("nvidia[0-9]*")) if dev.is_dir() else False


def cpu_build_hint(host_has_gpus: bool | None = None) -> str | None:
    """What to do when this host has GPUs (the driver's say, unless given) that the llama.cpp build cannot use; None
    when there is nothing to say."""
    has_gpus = host_has_nvidia_gpus() if host_has_gpus is None else host_has_gpus
    if not has_gpus or gpu_offload_supported():
        return None
    return ("this host has NVIDIA GPUs but llama-cpp-python was built for CPUs only, so copies compute on the CPU. "
            f"For a CUDA build run: {GPU_BUILD_COMMAND} (or point LLAMA_CPP_LIB_PATH at the build/bin folder of "
            "llama.cpp built with -DGGML_CUDA=ON)")

