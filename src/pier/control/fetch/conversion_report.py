"""What a conversion says to people: its progress read off the converter's and the quantizer's output, the disk
space it needs, and why it failed, in words that name the cause and the fix (pure functions)."""

from __future__ import annotations

import re

from pier.control.fetch.precision import Precision

_SHARD = re.compile(r"indexing model part '(?:[^']*?-(\d+)-of-(\d+)\.safetensors|([^']+))'")
_WRITING = re.compile(r"Writing:\s*(\d+)%")
_QUANTIZING = re.compile(r"^\[\s*(\d+)/\s*(\d+)\]")
_ARCHITECTURE = re.compile(r"(?:Architecture '?|Model )([\w.-]+)'? (?:is )?not supported")

# Bytes per weight as stored in a checkpoint, by dtype or by how it was quantized for GPUs.
SOURCE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "": 2.0}
QUANTIZED_SOURCE_BYTES = {"fp8": 1.0, "modelopt": 1.0, "gptq": 0.5, "compressed-tensors": 0.5, "bitnet": 0.25}
# Bytes per weight in a GGUF of each type (block scales included; K-quant mixes as llama.cpp lays them out).
GGUF_BYTES = {
    "f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 1.0625, "q6_k": 0.8203, "q5_k_m": 0.7109, "q5_k_s": 0.6875,
    "q5_1": 0.75, "q5_0": 0.6875, "q4_k_m": 0.6055, "q4_k_s": 0.5625, "q4_1": 0.625, "q4_0": 0.5625,
    "q3_k_l": 0.5352, "q3_k_m": 0.4883, "q3_k_s": 0.4297, "q2_k": 0.4102,
}
MARGIN = 1.05
SLACK_BYTES = 64 * 2**20


def progress_of(line: str) -> str:
    """The step a line of the converter's or quantizer's output shows ("" for the rest)."""
    if match := _SHARD.search(line):
        if match.group(1):
            return f"reading shard {int(match.group(1))} of {int(match.group(2))}"
        return f"reading {match.group(3)}"
    if match := _WRITING.search(line):
        return f"converting: {match.group(1)}% written"
    if match := _QUANTIZING.search(line):
        return f"quantizing: tensor {match.group(1)} of {match.group(2)}"
    return ""


def space_needed(weights_bytes: int, dtype: str, quant_method: str, wanted: Precision) -> int:
    """Bytes a conversion writes: the converter's output, and the quantizer's beside it while it runs."""
    per_weight = QUANTIZED_SOURCE_BYTES.get(quant_method) or SOURCE_BYTES.get(dtype, 2.0)
    weights = weights_bytes / per_weight
    written = weights * GGUF_BYTES[wanted.outtype]
    if wanted.quantize:
        written += weights * GGUF_BYTES[wanted.quantize]
    return int(written * MARGIN) + SLACK_BYTES


def failure_reason(tail: list[str], code: int, architecture: str, where: str) -> str:
    """A FailureReason for a conversion that exited with `code`, from the last lines it printed."""
    text = "\n".join(tail)
    if match := _ARCHITECTURE.search(text):
        return (f"{where} is a {match.group(1)}, an architecture llama.cpp's converter does not know: serve a GGUF of "
                "the model, or a model of an architecture llama.cpp supports (Llama, Mistral, Qwen2/3, Gemma, Phi-3, "
                "...).")
    if "pre-tokenizer was not recognized" in text:
        return (f"{where}'s tokenizer ({architecture}) has a BPE pre-tokenizer llama.cpp's converter does not "
                "recognize (a retrained or edited tokenizer): use the model's original tokenizer files, or a GGUF of "
                "the model.")
    if "Quant method is not yet supported" in text or "dequantization is not yet implemented" in text:
        return (f"{where} is quantized in a way llama.cpp's converter cannot dequantize ({_last_error(tail)}): use "
                "the model's original checkpoint with HF_MODEL_QUANTIZE=q4_k_m, or a GGUF of the model.")
    if code in (-9, 137) or "MemoryError" in text:
        return (f"Converting {where} ran out of memory (the converter was killed): give the gateway's host more "
                "memory, or serve a GGUF of the model.")
    if code < 0:
        return f"Converting {where} was stopped by signal {-code}; it starts again when the endpoint is updated."
    return (f"Converting {where} ({architecture}) with llama.cpp's converter failed: {_last_error(tail)}. Serve a "
            "GGUF of the model instead; the gateway's log has the converter's last lines.")


def _last_error(tail: list[str]) -> str:
    """The line that says what went wrong: the exception at the end of a traceback, else the last line."""
    for line in reversed(tail):
        stripped = line.strip()
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", stripped) or stripped.startswith("error:"):
            return stripped
    return tail[-1].strip() if tail else "no output"
