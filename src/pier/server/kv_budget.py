"""A copy's KV cache from its settings and its GGUF: the cell type, checked before llama.cpp sees it, and how
many cells (llama.cpp's n_ctx) PIER_KV_CACHE_MB buys with that type.

The shape comes from the GGUF header, so the check and the sizing happen before the weights load. Every
attention layer is counted at full length: exact for models without sliding-window layers, an upper bound
on what the others use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pier.engine.kv_type import KvShape, kv_type_problem
from pier.env import SettingsError
from pier.model.gguf_meta import GgufFormatError, read_metadata
from pier.server.settings import ServerSettings


def kv_shape(gguf: Path) -> KvShape:
    """The K and V widths per layer of the model in `gguf`, from its metadata."""
    try:
        arch = read_metadata(gguf, ["general.architecture"]).get("general.architecture")
        keys = {k: f"{arch}.{k}" for k in ("block_count", "embedding_length", "attention.head_count",
                                            "attention.head_count_kv", "attention.key_length",
                                            "attention.value_length")}
        meta = read_metadata(gguf, keys.values())
    except (OSError, GgufFormatError) as error:
        raise SettingsError(f"cannot read the model's shape from {gguf} to size its KV cache: {error}") from None
    value = {k: meta.get(full) for k, full in keys.items()}
    if not isinstance(arch, str) or not isinstance(value["block_count"], int):
        raise SettingsError(f"{gguf} does not say its architecture and layers, so PIER_KV_CACHE_MB cannot size its "
                            "KV cache: set MAX_BATCH_TOTAL_TOKENS (cells) instead")
    heads = _first(value["attention.head_count"]) or 1
    kv_heads = _first(value["attention.head_count_kv"]) or heads
    k_head = value["attention.key_length"] or (value["embedding_length"] or 0) // heads
    v_head = value["attention.value_length"] or k_head
    return KvShape(value["block_count"], kv_heads * k_head, kv_heads * v_head, k_head, v_head)


def _first(value: Any) -> int | None:
    """A per-layer list's largest entry (some models vary heads by layer), or the single value."""
    if isinstance(value, list):
        return max((v for v in value if isinstance(v, int)), default=None)
    return value if isinstance(value, int) else None


def kv_cells(settings: ServerSettings, gguf: Path) -> int:
    """llama.cpp's n_ctx for this copy; raises SettingsError (how to fix it) for a KV type llama.cpp would refuse
    or a memory budget too small for one cell block."""
    needs_shape = settings.kv_cache_mb is not None or settings.kv_cache_type != "f16"
    shape = kv_shape(gguf) if needs_shape else None
    problem = kv_type_problem(settings.kv_cache_type, settings.flash_attention, shape)
    if problem:
        raise SettingsError(f"PIER_KV_CACHE_TYPE={settings.kv_cache_type}: {problem}.")
    if settings.kv_cache_mb is None or shape is None:
        return settings.context_size
    cells = shape.cells_in(settings.kv_cache_mb << 20, settings.kv_cache_type)
    if cells < 256:
        need = -(-shape.cell_bytes(settings.kv_cache_type) * 256 // (1 << 20))
        raise SettingsError(f"PIER_KV_CACHE_MB={settings.kv_cache_mb} holds fewer than 256 tokens of this model's "
                            f"{settings.kv_cache_type} KV cache: give it at least {need} MiB.")
    return cells
