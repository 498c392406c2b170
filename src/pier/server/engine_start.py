"""A copy's engine started on a GGUF: its KV cache sized, its offload planned, its CPU kernels proven, llama.cpp
loaded and the engine thread running. The single-model copy (pier.server.container) and each model of a
multi-model copy (pier.server.multi_model.app) start theirs here.
"""

from __future__ import annotations

from pathlib import Path

from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.prefix_cache import sequence_ids
from pier.model.gguf_meta import GgufFormatError, truncation
from pier.server.kernel_choice import choose_kernels
from pier.server.kv_budget import kv_cells
from pier.server.settings import ServerSettings


def start_engine(settings: ServerSettings, gguf: Path) -> Engine:
    """Load the GGUF into llama.cpp and start the engine thread (slow: run it off the event loop)."""
    from pier.engine.llama import LlamaRunner  # loads llama.cpp; not needed to build the app
    from pier.server.copy_offload import copy_offload

    problem = truncation(gguf)  # llama.cpp only logs why it refuses a file cut short
    if problem:
        raise GgufFormatError(problem)
    cells = kv_cells(settings, gguf)  # checks the KV cache type first: a clear error, not llama.cpp's
    offload = copy_offload(settings, gguf, cells)
    if not offload.on_gpu:
        prove_kernels(settings, gguf)
    runner = LlamaRunner(
        gguf, n_ctx=cells, n_batch=settings.batch_tokens, n_threads=settings.threads,
        flash_attn=settings.flash_attention, kv_type=settings.kv_cache_type,
        separate_decode_rows=settings.separate_decode_rows, offload=offload,
        # Finished prompts stay cached as prefixes under sequence ids of their own.
        n_seq_max=sequence_ids(settings.parallel, cells),
    )
    try:
        config = EngineConfig(
            max_running=settings.parallel, step_tokens=settings.batch_tokens, prefix_cache=settings.prefix_cache,
            prefix_floor_cells=settings.prefix_floor_cells, host_cache_bytes=settings.host_cache_mb << 20,
            itl_bound=settings.itl_bound, speculate=settings.speculate)
    except Exception:
        runner.close()
        raise
    return Engine(runner, config).start()


def prove_kernels(settings: ServerSettings, gguf: Path, embeddings: bool = False) -> None:
    """The fastest CPU kernels that run this model here (pier.server.kernel_choice), before llama.cpp loads it."""
    from pier.engine.cpus import engine_threads, usable_cores

    choose_kernels(gguf, settings.cache_dir, settings.threads or engine_threads(usable_cores()), embeddings)
