"""Offload: which GPUs a copy's model and KV cache go to, and how many layers (pure; llama.cpp's devices come in).

A copy that holds GPUs puts every layer and its KV cache on them (llama.cpp's n_gpu_layers = all), split by layer
over several GPUs as llama-server does; a copy that holds none computes on the CPU. A copy the gateway gave GPUs
to never falls back to the CPU by itself: a build without a GPU backend, or GPUs it cannot see, stop the load with
what to do, as a model that does not fit its GPUs' memory does unless the operator asked for a partial offload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pier.engine.devices import GPU_BUILD_COMMAND, Device

SPLIT_MODES = ("none", "layer", "row")
ALL_LAYERS = -1  # llama.cpp's n_gpu_layers for "every layer, and the output layer"
_GIB = 2**30
# llama.cpp's compute buffers and CUDA's own context, beside weights and KV: an estimate, on the generous side
_RESERVE_BYTES = 512 << 20
_RESERVE_SHARE = 0.05


class OffloadError(ValueError):
    """The copy cannot run where it was placed; the message says why and what to change."""


@dataclass(frozen=True)
class GpuSettings:
    """What the operator and the placement ask for. `gpus`: how many GPUs the copy holds (PIER_GPUS from the
    gateway, or SM_NUM_GPUS / NUM_SHARD); None takes every GPU this process sees, as a standalone container
    does. `gpu_layers`: None offloads every layer; a number asks for that many (a partial offload)."""

    gpus: int | None = None
    gpu_layers: int | None = None
    split_mode: str = "layer"
    main_gpu: int = 0
    tensor_split: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Offload:
    """The decision: `gpus` indexes the GPUs this process sees (llama.cpp's order), `gpu_layers` is llama.cpp's."""

    gpus: tuple[int, ...] = ()
    gpu_layers: int = 0
    split_mode: str = "none"
    main_gpu: int = 0
    tensor_split: tuple[float, ...] | None = None

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus) and self.gpu_layers != 0

    @property
    def partial(self) -> bool:
        return self.on_gpu and self.gpu_layers != ALL_LAYERS


ON_CPU = Offload()


def plan_offload(wanted: GpuSettings, visible: Sequence[Device], supported: bool) -> Offload:
    """Where the model goes, or OffloadError when the copy holds GPUs it cannot use."""
    if wanted.gpus == 0 or wanted.gpu_layers == 0:
        return ON_CPU
    if not supported:
        if wanted.gpus:
            raise OffloadError(f"this copy holds {_gpus(wanted.gpus)} but llama.cpp was built without a GPU backend. "
                               f"Install a CUDA build: {GPU_BUILD_COMMAND}")
        return ON_CPU
    gpu_count = len(visible)
    if wanted.gpus is None and gpu_count == 0:
        return ON_CPU
    count = wanted.gpus or gpu_count
    if count > gpu_count:
        raise OffloadError(f"this copy holds {_gpus(count)} but llama.cpp sees {gpu_count}: check "
                           "CUDA_VISIBLE_DEVICES and the GPU driver (nvidia-smi), or ask for fewer GPUs "
                           "(SM_NUM_GPUS / NumberOfAcceleratorDevicesRequired)")
    if wanted.main_gpu >= count:
        raise OffloadError(f"PIER_MAIN_GPU={wanted.main_gpu} but the copy holds {_gpus(count)}: "
                           f"use 0 to {count - 1}")
    if wanted.tensor_split is not None and len(wanted.tensor_split) > count:
        raise OffloadError(f"PIER_TENSOR_SPLIT has {len(wanted.tensor_split)} shares but the copy holds "
                           f"{_gpus(count)}: give one share per GPU")
    layers = ALL_LAYERS if wanted.gpu_layers is None else wanted.gpu_layers
    split = wanted.split_mode if count > 1 else "none"
    return Offload(tuple(range(count)), layers, split, wanted.main_gpu, wanted.tensor_split)


def memory_need(weights_bytes: int, kv_bytes: int) -> int:
    """GPU memory a fully offloaded copy takes, about: its weights, its KV cache and llama.cpp's buffers."""
    return weights_bytes + kv_bytes + _RESERVE_BYTES + int(_RESERVE_SHARE * weights_bytes)


def fit_problem(offload: Offload, visible: Sequence[Device], weights_bytes: int, kv_bytes: int) -> str | None:
    """Why a full offload would not fit its GPUs' free memory (with what to change), or None. A partial offload
    is the operator's own sizing: llama.cpp's load says if that fails."""
    if not offload.on_gpu or offload.partial:
        return None
    need = memory_need(weights_bytes, kv_bytes)
    free = sum(visible[i].free_bytes for i in offload.gpus)
    if need <= free:
        return None
    return (f"the model needs about {need / _GIB:.1f} GiB of GPU memory (weights {weights_bytes / _GIB:.1f} GiB, "
            f"KV cache {kv_bytes / _GIB:.1f} GiB, buffers) but its {_gpus(len(offload.gpus))} "
            f"{'has' if len(offload.gpus) == 1 else 'have'} {free / _GIB:.1f} GiB free: give the copy more GPUs "
            "(SM_NUM_GPUS / NumberOfAcceleratorDevicesRequired), a smaller KV cache (MAX_BATCH_TOTAL_TOKENS, "
            "PIER_KV_CACHE_MB, PIER_KV_CACHE_TYPE=q8_0), or offload only some layers (PIER_GPU_LAYERS=N)")


def _gpus(count: int) -> str:
    return f"{count} GPU{'s' if count != 1 else ''}"
