"""A LoRA adapter GGUF file, read without llama.cpp: whether it is one, and what its tensors weigh. The gateway's
control plane checks adapters with it (importing nothing of llama.cpp there); the engine too, before llama.cpp
reads the file. Imports nothing of pier, so both share it without the gateway importing the engine."""

from __future__ import annotations

from pathlib import Path

from gguf import GGUFReader


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
    return None


def _string(reader: GGUFReader, key: str) -> str | None:
    field = reader.get_field(key)
    return None if field is None else str(field.contents())


def tensor_bytes(path: Path) -> tuple[int, float]:
    """The adapter's tensor bytes and its lora alpha (0: none recorded, llama.cpp then scales by 1)."""
    reader = GGUFReader(path)
    alpha = reader.get_field("adapter.lora.alpha")
    return sum(int(t.n_bytes) for t in reader.tensors), float(alpha.contents()) if alpha is not None else 0.0
