"""The KV cache's element type: what one cell (one token's K and V in every layer) costs in bytes.

llama.cpp stores K and V rows in `type_k` / `type_v`; the quantized types pack blocks of 32 values with a
16-bit scale (q8_0: 34 bytes per 32 values, q4_0: 18), so a q8_0 cache holds 1.9x the tokens of an f16 one in
the same memory and q4_0 3.6x. llama.cpp quantizes V only inside flash attention, and needs each head's width
to be a whole number of blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

# name -> (bytes per block, values per block)
_LAYOUT = {"f32": (4, 1), "f16": (2, 1), "q8_0": (34, 32), "q4_0": (18, 32)}
KV_TYPE_NAMES = tuple(_LAYOUT)
DEFAULT_KV_TYPE = "f16"


def is_quantized(kv_type: str) -> bool:
    return _LAYOUT[kv_type][1] > 1


def row_bytes(kv_type: str, width: int) -> int:
    """Bytes of `width` values of one type (whole blocks)."""
    size, block = _LAYOUT[kv_type]
    return -(-width // block) * size


@dataclass(frozen=True)
class KvShape:
    """What a model stores per token: its attention layers and the K and V widths of one layer (all heads)."""

    n_layer: int
    k_width: int
    v_width: int
    k_head: int  # one head's K width: a quantized type's blocks must divide it
    v_head: int

    def cell_bytes(self, kv_type: str) -> int:
        """Bytes one cell takes with K and V both of `kv_type`."""
        return self.n_layer * (row_bytes(kv_type, self.k_width) + row_bytes(kv_type, self.v_width))

    def cells_in(self, budget_bytes: int, kv_type: str, multiple: int = 256) -> int:
        """The cells `budget_bytes` holds, rounded down to llama.cpp's padding of the cache (`multiple`)."""
        return budget_bytes // self.cell_bytes(kv_type) // multiple * multiple


def kv_type_problem(kv_type: str, flash_attention: bool | None, shape: KvShape | None = None) -> str | None:
    """Why llama.cpp would refuse `kv_type` for K and V, in words that say how to fix it; None when it will not.
    `flash_attention`: True, False or None (llama.cpp's own choice, which turns it on for a quantized V)."""
    if kv_type not in _LAYOUT:
        return f"unknown KV cache type {kv_type!r}: use one of {', '.join(KV_TYPE_NAMES)}"
    if not is_quantized(kv_type):
        return None
    if flash_attention is False:
        return (f"a {kv_type} KV cache quantizes V, which llama.cpp does only inside flash attention: turn flash "
                "attention on (PIER_FLASH_ATTENTION=true or auto) or use the f16 KV cache type")
    block = _LAYOUT[kv_type][1]
    if shape is not None and (shape.k_head % block or shape.v_head % block):
        return (f"a {kv_type} KV cache stores blocks of {block} values, which do not divide this model's attention "
                f"heads ({shape.k_head} K / {shape.v_head} V values each): use the f16 KV cache type")
    return None
