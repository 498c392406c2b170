"""LoRA adapters with random weights for a synthetic model (builder.py), in the GGUF form llama.cpp loads.

llama.cpp (src/llama-adapter.cpp) reads `general.type = adapter`, `general.architecture` (the model's),
`adapter.type = lora` and `adapter.lora.alpha`, and for each adapted weight W a pair `<W>.lora_a` / `<W>.lora_b`:
A of shape (rank, n_in) and B of shape (n_out, rank) in numpy order, so W x + (alpha / rank) * B A x.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from gguf import GGUFWriter

from pier.synthetic.builder import TINY, ModelShape

TARGETS = ("attn_q", "attn_v", "ffn_up", "ffn_down")  # the weights adapted in every layer


def _in_out(shape: ModelShape, target: str) -> tuple[int, int]:
    e, kv, ff = shape.n_embd, shape.n_embd_kv, shape.n_ff
    return {"attn_q": (e, e), "attn_k": (e, kv), "attn_v": (e, kv), "attn_output": (e, e),
            "ffn_gate": (e, ff), "ffn_up": (e, ff), "ffn_down": (ff, e)}[target]


def build_lora_gguf(path: str | Path, shape: ModelShape = TINY, rank: int = 4, seed: int = 0, gain: float = 1.0,
                    targets: tuple[str, ...] = TARGETS, name: str = "pier-synthetic-lora",
                    poison: float | None = None, alpha: float | None = None) -> Path:
    """Write a LoRA adapter for a model of `shape` (any seed) to `path`; same arguments, same bytes. `gain`: the
    standard deviation of what it adds to each adapted weight's output, relative to the input's (1: as large
    as the weight's own, enough to change greedy answers). `poison`: every B weight set to it (NaN, inf, 1e30: a
    hostile adapter). `alpha`: adapter.lora.alpha (default the rank: B A as drawn)."""
    if rank < 1:
        raise ValueError(f"rank must be >= 1, got {rank}")
    rng = np.random.default_rng(seed)
    out = Path(path)
    writer = GGUFWriter(out, "llama")
    writer.add_type("adapter")
    writer.add_name(name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank) if alpha is None else alpha)
    for layer in range(shape.n_layer):
        for target in targets:
            n_in, n_out = _in_out(shape, target)
            a = rng.normal(0.0, 1.0 / math.sqrt(n_in), (rank, n_in)).astype(np.float32)
            b = rng.normal(0.0, gain / math.sqrt(rank), (n_out, rank)).astype(np.float32)
            if poison is not None:
                b[...] = poison
            writer.add_tensor(f"blk.{layer}.{target}.weight.lora_a", a)
            writer.add_tensor(f"blk.{layer}.{target}.weight.lora_b", b)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    return out
