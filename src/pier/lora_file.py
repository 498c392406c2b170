"""A LoRA adapter GGUF file, read without llama.cpp: whether it is one, and what its tensors weigh. The gateway's
control plane checks adapters with it (importing nothing of llama.cpp there); the engine too, before llama.cpp
reads the file. Imports nothing of pier, so both share it without the gateway importing the engine."""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from gguf import GGUFReader, ReaderTensor
from gguf.quants import dequantize

# The largest weight (or alpha) an adapter may hold. Trained LoRA weights stay near 1; B A at 1e6 turned a tiny
# model's answers to NaN (empty text, every time) while llama.cpp loaded the file without a word.
MAX_WEIGHT = 1e4


def adapter_problem(path: Path) -> str | None:
    """Why `path` cannot be a llama.cpp LoRA adapter, or None. Checked before llama.cpp reads it, because
    llama.cpp logs its reasons instead of returning them."""
    if not path.is_file():
        return f"No file at {path}: an adapter is a GGUF LoRA file (general.type = adapter, adapter.type = lora)."
    try:
        reader = GGUFReader(path)
    except Exception as e:  # any unreadable file gets the same advice
        return (f"{path.name} is not a GGUF file ({e}): pier loads LoRA adapters as GGUF; convert a PEFT "
                "adapter with llama.cpp's convert_lora_to_gguf.py.")
    kinds = (_string(reader, "general.type"), _string(reader, "adapter.type"))
    if kinds != ("adapter", "lora"):
        return (f"{path.name} is a GGUF but not a LoRA adapter (general.type={kinds[0]!r}, adapter.type="
                f"{kinds[1]!r}; want 'adapter' and 'lora').")
    return _weights_problem(path.name, reader)


def _weights_problem(name: str, reader: GGUFReader) -> str | None:
    """Why the adapter's numbers would break every answer under it (NaN, infinite or huge weights or alpha)."""
    fix = "convert the adapter again from a trained PEFT checkpoint"
    alpha = reader.get_field("adapter.lora.alpha")
    if alpha is not None:
        value = float(alpha.contents())
        if not math.isfinite(value) or abs(value) > MAX_WEIGHT:
            return (f"{name} has adapter.lora.alpha = {value}: alpha must be a finite number up to "
                    f"{MAX_WEIGHT:g}; {fix}.")
    for tensor in reader.tensors:
        values = _values(tensor)
        if values is None or values.size == 0:
            continue
        if not np.isfinite(values).all():
            return f"{name}'s {tensor.name} holds NaN or infinite weights, so every answer under it is empty: {fix}."
        peak = float(np.abs(values).max())
        if peak > MAX_WEIGHT:
            return (f"{name}'s {tensor.name} holds weights up to {peak:.3g}, past the {MAX_WEIGHT:g} pier takes: the "
                    f"model's answers under it would be noise or overflow to NaN (empty text); {fix}.")
    return None


def _values(tensor: ReaderTensor) -> np.ndarray | None:
    """The tensor's weights as floats; None for a type gguf-py cannot read (llama.cpp judges those)."""
    try:
        return np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    except (NotImplementedError, ValueError, KeyError):
        return None


def _string(reader: GGUFReader, key: str) -> str | None:
    field = reader.get_field(key)
    return None if field is None else str(field.contents())


def tensor_bytes(path: Path) -> tuple[int, float]:
    """The adapter's tensor bytes and its lora alpha (0: none recorded, llama.cpp then scales by 1)."""
    reader = GGUFReader(path)
    alpha = reader.get_field("adapter.lora.alpha")
    return sum(int(t.n_bytes) for t in reader.tensors), float(alpha.contents()) if alpha is not None else 0.0


def base_mismatch(adapter: Path, base: Path) -> str | None:
    """Why the adapter cannot apply to the base model's weights (llama.cpp's own checks: each lora_a / lora_b pair
    names a weight of the base, whose input and output sizes it matches, and the two share a rank), or None. Read
    from the GGUF headers only; the answer is kept per file version, as the control plane asks on every tick."""
    return _mismatch(_version(adapter), _version(base))


def _version(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=64)
def _mismatch(adapter: tuple[str, int, int], base: tuple[str, int, int]) -> str | None:
    weights = {t.name: [int(n) for n in t.shape] for t in GGUFReader(base[0]).tensors}
    pairs: dict[str, dict[str, list[int]]] = {}
    for tensor in GGUFReader(adapter[0]).tensors:
        weight, _, half = tensor.name.rpartition(".lora_")
        pairs.setdefault(weight, {})[half] = [int(n) for n in tensor.shape]
    name, base_name = Path(adapter[0]).name, Path(base[0]).name
    for weight, halves in pairs.items():
        a, b, shape = halves.get("a"), halves.get("b"), weights.get(weight)
        if a is None or b is None or len(a) < 2 or len(b) < 2:
            return f"{name} has {weight}'s lora_a or lora_b without the other: it is not a whole LoRA adapter."
        if shape is None or len(shape) < 2:
            return (f"{name} adapts {weight}, which the base model {base_name} does not have: the adapter was "
                    "made for another model. Convert it from a PEFT adapter of this base model.")
        if (a[0], b[1], a[1]) != (shape[0], shape[1], b[0]):
            return (f"{name} was made for another model: its {weight} maps {a[0]} inputs to {b[1]} outputs "
                    f"(rank {a[1]}/{b[0]}), the base model {base_name}'s {shape[0]} to {shape[1]}. Convert it "
                    "from a PEFT adapter of this base model.")
    return None
