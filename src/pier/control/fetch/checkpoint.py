"""A model folder in Hugging Face layout (`config.json`, `*.safetensors`, tokenizer files), and what pier must
know of it before llama.cpp's converter turns it into a GGUF.

Every refusal is found here from names and `config.json` alone, in milliseconds, so an endpoint with a checkpoint
pier cannot convert fails at once with the cause and the fix. Pickled weights (`.bin`, `.pt`, ...) and Python files
are never handed to the converter: unpickling runs code, and so would a repo's own tokenizer code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
# Files the converter reads besides the weights; the tokenizer is one of these sets.
TOKENIZERS = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("tekken.json",))
# What a converted checkpoint may bring: weights as safetensors, JSON settings, a SentencePiece model, vocabularies
# and chat templates. Anything else (pickles, code, other frameworks' weights) stays behind.
KEPT_SUFFIXES = frozenset({".json", ".safetensors", ".model", ".txt", ".jinja", ".tiktoken"})
PICKLED_SUFFIXES = frozenset({".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"})
# quantization_config.quant_method values llama.cpp's converter dequantizes (conversion/base.py, dequant_model).
DEQUANTIZED = frozenset({"fp8", "gptq", "compressed-tensors", "bitnet", "modelopt"})
DTYPES = frozenset({"float32", "float16", "bfloat16"})


class CheckpointRefused(ValueError):
    """The folder cannot be converted; the message names the cause and the fix."""


@dataclass(frozen=True)
class Checkpoint:
    architecture: str  # config.json's architectures[0], e.g. LlamaForCausalLM
    dtype: str  # float32, float16 or bfloat16; "" when config.json does not say
    quant_method: str  # config.json's quantization_config.quant_method; "" for a plain checkpoint
    files: tuple[str, ...]  # the names (relative to the folder) the converter is given
    weights_bytes: int  # the safetensors files' total size


@dataclass(frozen=True)
class Adapter:
    base: str  # adapter_config.json's base_model_name_or_path: a Hub id or a local folder
    files: tuple[str, ...]


def is_hf_layout(folder: Path) -> bool:
    """A folder pier converts: config.json (or adapter_config.json) and weights at its top (safetensors; pickles
    too, to be refused with the reason), no GGUF to serve, and no code of the user's (an inference.py at its top,
    or a code/ folder with Python in it: that code loads the model its own way)."""
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if CONFIG not in names and ADAPTER_CONFIG not in names:
        return False
    if INDEX not in names and not any(PurePosixPath(n).suffix in {".safetensors", *PICKLED_SUFFIXES} for n in names):
        return False
    if (folder / "inference.py").is_file() or any((folder / "code").glob("*.py")):
        return False
    return not any(folder.glob("*.gguf")) and not any(folder.glob("*/*.gguf"))


def wanted(names: Iterable[str]) -> list[str]:
    """Of a repo's or folder's files, those a conversion uses: top-level settings, safetensors and tokenizer
    files (never pickles, code, or weights of other frameworks)."""
    return sorted(n for n in names if "/" not in n and PurePosixPath(n).suffix in KEPT_SUFFIXES)


def problem(names: Iterable[str], where: str) -> str:
    """Why these file names cannot be a convertible checkpoint ("" when they can), from the names alone."""
    present = set(names)
    if CONFIG not in present:
        if ADAPTER_CONFIG in present:
            return _adapter_problem(present, where)
        return (f"{where} has no config.json: give a Hugging Face checkpoint folder (config.json, *.safetensors, "
                "tokenizer).")
    if not any(n.endswith(".safetensors") for n in present) and INDEX not in present:
        pickled = sorted(n for n in present if PurePosixPath(n).suffix in PICKLED_SUFFIXES)
        if pickled:
            return (f"{where} holds its weights only as pickled files ({', '.join(pickled[:3])}), which pier never "
                    "unpickles (loading a pickle runs code). Save the model as safetensors (save_pretrained(..., "
                    "safe_serialization=True), the default since transformers 4.35) or use the repo's safetensors "
                    "revision.")
        return f"{where} has config.json but no *.safetensors weights: upload the model's safetensors files."
    if not any(all(n in present for n in group) for group in TOKENIZERS):
        return (f"{where} has no tokenizer (tokenizer.json, tokenizer.model, or vocab.json with merges.txt): save it "
                "beside the weights (tokenizer.save_pretrained(folder)) so the GGUF can carry it.")
    return ""


def _adapter_problem(present: set[str], where: str) -> str:
    if ADAPTER_WEIGHTS in present:
        return ""
    if any(PurePosixPath(n).suffix in PICKLED_SUFFIXES for n in present):
        return (f"{where} holds its LoRA adapter only as a pickle (adapter_model.bin), which pier never unpickles: "
                "save it with PEFT's save_pretrained(..., safe_serialization=True).")
    return f"{where} has adapter_config.json but no {ADAPTER_WEIGHTS}: upload the adapter's weights."


def is_adapter(folder: Path) -> bool:
    """A PEFT adapter folder (adapter_config.json, no config.json of a full model)."""
    return (folder / ADAPTER_CONFIG).is_file() and not (folder / CONFIG).is_file()


def inspect_adapter(folder: Path, where: str | None = None) -> Adapter:
    """What a PEFT adapter folder holds, or CheckpointRefused with the cause and the fix."""
    where = where or str(folder)
    names = {p.name for p in folder.iterdir() if p.is_file()}
    reason = _adapter_problem(names, where)
    if reason:
        raise CheckpointRefused(reason)
    try:
        settings = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointRefused(f"{where}/{ADAPTER_CONFIG} is not readable JSON ({error}): save the adapter again "
                                "with PEFT's save_pretrained.") from None
    kind = str(settings.get("peft_type") or "LORA") if isinstance(settings, dict) else ""
    if kind.upper() != "LORA":
        raise CheckpointRefused(f"{where} is a {kind or 'unknown'} adapter; llama.cpp converts LoRA adapters only: "
                                "merge it into its base model and serve the merged checkpoint.")
    base = str(settings.get("base_model_name_or_path") or "")
    if not base:
        raise CheckpointRefused(f"{where}/{ADAPTER_CONFIG} names no base_model_name_or_path: set it to the base "
                                "model's Hub id (its config.json is read from there) or a local folder holding it.")
    return Adapter(base, (ADAPTER_CONFIG, ADAPTER_WEIGHTS))


def inspect(folder: Path, where: str | None = None) -> Checkpoint:
    """What the folder holds, or CheckpointRefused with the cause and the fix."""
    where = where or str(folder)
    names = [p.name for p in folder.iterdir() if p.is_file()]
    reason = problem(names, where)
    if reason:
        raise CheckpointRefused(reason)
    config = _config(folder, where)
    architectures = config.get("architectures") or []
    if not isinstance(architectures, list) or not architectures or not isinstance(architectures[0], str):
        raise CheckpointRefused(f"{where}/config.json names no architectures (e.g. \"architectures\": "
                                "[\"LlamaForCausalLM\"]): save the model with save_pretrained, which writes it.")
    _check_shards(folder, where)
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method") or "") if isinstance(quant, dict) else ""
    if method and method not in DEQUANTIZED:
        raise CheckpointRefused(
            f"{where} is quantized with {method} for GPUs, which llama.cpp's converter cannot dequantize. Use the "
            f"model's original (unquantized) checkpoint with HF_MODEL_QUANTIZE=q4_k_m (or q8_0) for a small model, "
            f"or a GGUF repo of it.")
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "")
    files = tuple(wanted(names))
    weights = sum((folder / n).stat().st_size for n in files if n.endswith(".safetensors"))
    return Checkpoint(architectures[0], dtype if dtype in DTYPES else "", method, files, weights)


def _config(folder: Path, where: str) -> dict[str, object]:
    try:
        config = json.loads((folder / CONFIG).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointRefused(f"{where}/config.json is not readable JSON ({error}): save the model again with "
                                "save_pretrained.") from None
    if not isinstance(config, dict):
        raise CheckpointRefused(f"{where}/config.json is not a JSON object: save the model again with save_pretrained.")
    return config


def _check_shards(folder: Path, where: str) -> None:
    """Every shard the index names is there (a half-uploaded checkpoint fails now, not minutes into converting)."""
    index = folder / INDEX
    if not index.is_file():
        return
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as error:
        raise CheckpointRefused(f"{where}/{INDEX} is not readable JSON ({error}): save the model again.") from None
    missing = sorted({str(s) for s in weight_map.values()} - {p.name for p in folder.iterdir()})
    if missing:
        raise CheckpointRefused(f"{where} lacks {len(missing)} shard(s) its {INDEX} names ({', '.join(missing[:3])}): "
                                "upload every shard.")
