"""TGI's `HF_MODEL_QUANTIZE` (bitsandbytes, gptq, awq, eetq, fp8, ...) against a GGUF: a GGUF's weights are
already quantized, each tensor as stored (its `general.file_type` names the mix, e.g. Q4_K_M), and llama.cpp serves
them as stored; it quantizes nothing at load. So the setting is honoured only when it names that same type; any
other value is said in the copy's log at start, with how to get the weights asked for, rather than dropped."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from gguf import LlamaFileType

from pier.model.gguf_meta import read_metadata

log = logging.getLogger("pier.server")

QUANTIZE_ENV = "HF_MODEL_QUANTIZE"
FILE_TYPE_KEY = "general.file_type"


def file_type_name(code: int) -> str | None:
    """llama.cpp's name of a GGUF's `general.file_type` (Q4_K_M, F16, ...), None for a code it does not know."""
    try:
        name = LlamaFileType(code).name
    except ValueError:
        return None
    return name.removeprefix("MOSTLY_").removeprefix("ALL_")


def quantize_warning(value: str | None, gguf: str, stored_as: str | None) -> str | None:
    """What to say about HF_MODEL_QUANTIZE=`value` for the GGUF called `gguf` whose weights are `stored_as` (None:
    not known), or None when it is unset or names that type."""
    if value is None or not value.strip():
        return None
    asked = value.strip()
    if stored_as is not None and asked.replace("-", "_").upper() == stored_as:
        return None
    stored = f"stored as {stored_as}" if stored_as else "stored already quantized"
    return (f"{QUANTIZE_ENV}={asked} is ignored: {gguf} is a GGUF whose weights are {stored}, and llama.cpp serves "
            "them as stored (it quantizes nothing at load). For other weights, serve a GGUF of that quantization "
            f"(e.g. the model's Q8_0 or Q4_K_M file) and remove {QUANTIZE_ENV}.")


def warn_of_quantize(env: Mapping[str, str], gguf: Path) -> str | None:
    """Log (and return) quantize_warning for the environment's HF_MODEL_QUANTIZE and the GGUF file at `gguf`, its
    type read from its header."""
    value = env.get(QUANTIZE_ENV)
    if value is None or not value.strip():
        return None
    try:
        code = read_metadata(gguf, [FILE_TYPE_KEY]).get(FILE_TYPE_KEY)
    except (OSError, ValueError):  # GgufFormatError, an empty file's mmap
        code = None  # the load says what is wrong with the file
    warning = quantize_warning(value, gguf.name, file_type_name(code) if isinstance(code, int) else None)
    if warning is not None:
        log.warning("%s", warning)
    return warning
