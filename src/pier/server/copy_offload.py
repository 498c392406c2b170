"""Where this copy's model runs: the engine's offload plan for its settings and the GPUs llama.cpp sees, checked
against their free memory before the weights load (a clear reason, not a CUDA allocation failure half way)."""

from __future__ import annotations

import logging
from pathlib import Path

from pier.engine.devices import cpu_build_hint, gpu_offload_supported, gpus
from pier.engine.offload import Offload, OffloadError, fit_problem, plan_offload
from pier.server.kv_budget import kv_shape
from pier.server.settings import ServerSettings

log = logging.getLogger(__name__)


def copy_offload(settings: ServerSettings, gguf: Path, cells: int) -> Offload:
    """The offload for a copy of `cells` KV cells; raises OffloadError (why, and what to change)."""
    supported = gpu_offload_supported()
    visible = gpus() if supported else []
    offload = plan_offload(settings.gpu, visible, supported)
    if offload.on_gpu:
        kv_bytes = cells * kv_shape(gguf).cell_bytes(settings.kv_cache_type)
        problem = fit_problem(offload, visible, gguf.stat().st_size, kv_bytes)
        if problem:
            raise OffloadError(problem)
    elif (hint := cpu_build_hint()) is not None:
        log.warning(hint)
    return offload
