"""LoRA adapters loaded beside a model, and which one a llama.cpp context computes under.

llama.cpp keeps an adapter's A and B matrices as tensors of their own (`llama_adapter_lora_init`) and adds
scale * B(A x) to each adapted weight's output in the graph of every context the adapter is set on
(`llama_set_adapters_lora`). Adapters therefore share the base model's weights and KV cache; what one costs is
its tensors, reported as `nbytes`. Setting another adapter makes llama.cpp plan its graph again on the next
llama_decode, so the runner sets one per pass (engine/passes.py, `plan_adapter_passes`).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from pier.lora_file import adapter_problem, tensor_bytes

BASE = ""  # the name of "no adapter": the base model


@dataclass(frozen=True)
class AdapterInfo:
    name: str
    path: str
    scale: float
    nbytes: int  # the adapter's tensors: what it adds to the copy's memory
    alpha: float


class LoadedAdapters:
    """The adapters a model has loaded, by name, and the one its context is set to. Loading may happen on any
    thread; `use` only on the engine thread (it holds the lock while it sets the context)."""

    def __init__(self, model: llama_cpp.llama_model_p, ctx: llama_cpp.llama_context_p) -> None:
        self._model = model
        self._ctx = ctx
        self._lock = threading.Lock()
        self._handles: dict[str, llama_cpp.llama_adapter_lora_p] = {}
        self._info: dict[str, AdapterInfo] = {}
        self._current = BASE

    def load(self, name: str, path: Path, scale: float = 1.0) -> AdapterInfo:
        """Load the adapter at `path` as `name`, once. A name stays with its file: the KV its sequences computed
        is filed under the name (prefix and host caches), and its handle may be in the context a decode is
        running on another thread, so another file gets a name of its own (the copy's
        server/middleware/adapter_requests.py versions them)."""
        if not name:
            raise ValueError("An adapter needs a non-empty name.")
        known = self._info.get(name)
        if known is not None:
            if known.path == str(path) and known.scale == scale:
                return known
            raise ValueError(f"Adapter {name!r} is loaded from {known.path} (scale {known.scale}): load "
                             f"{path} (scale {scale}) under a name of its own.")
        problem = adapter_problem(path)
        if problem:
            raise ValueError(problem)
        nbytes, alpha = tensor_bytes(path)
        with self._lock:
            handle = llama_cpp.llama_adapter_lora_init(self._model, str(path).encode())
            if not handle:
                raise ValueError(f"llama.cpp could not load the adapter {path.name}: was it made for this model "
                                 "(same architecture and tensor shapes)? llama.cpp's log says which.")
            self._handles[name] = handle
            info = self._info[name] = AdapterInfo(name, str(path), scale, nbytes, alpha)
        return info

    def unload(self, name: str) -> bool:
        with self._lock:
            return self._drop(name)

    def _drop(self, name: str) -> bool:
        handle = self._handles.pop(name, None)
        self._info.pop(name, None)
        if handle is None:
            return False
        if self._current == name:
            self._set(BASE)
        llama_cpp.llama_adapter_lora_free(handle)
        return True

    def has(self, name: str) -> bool:
        return name == BASE or name in self._handles

    @property
    def loaded(self) -> list[AdapterInfo]:
        return list(self._info.values())

    @property
    def current(self) -> str:
        return self._current

    def use(self, name: str) -> None:
        """Compute the next llama_decode under adapter `name` (BASE: none)."""
        if name == self._current:
            return
        with self._lock:
            if name != BASE and name not in self._handles:
                raise KeyError(f"Adapter {name!r} is not loaded on this copy.")
            self._set(name)

    def _set(self, name: str) -> None:
        if name == BASE:
            llama_cpp.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            handles = (llama_cpp.llama_adapter_lora_p_ctypes * 1)(self._handles[name])  # type: ignore[misc]
            scales = (ctypes.c_float * 1)(self._info[name].scale)
            llama_cpp.llama_set_adapters_lora(self._ctx, handles, 1, scales)
        self._current = name
