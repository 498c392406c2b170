"""The precision a converted checkpoint is served at, from `HF_MODEL_QUANTIZE` / `QUANTIZE` as TGI and the
SageMaker seeds write them.

Unset: the checkpoint's own precision (F32, F16 or BF16), as TGI serves it. A GGUF type (`q8_0`, `q4_k_m`, ...):
llama.cpp's quantizer after conversion (`q8_0` and the float types the converter writes itself). TGI's own values
are mapped where a GGUF type is the honest equivalent, and the log says so; the values that name how a checkpoint was
already quantized for GPUs (`gptq`, `awq`, ...) describe the files, not a wish, so the checkpoint is taken as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

FLOATS = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}
CONVERTER_TYPES = frozenset({"f32", "f16", "bf16", "q8_0"})  # written by convert_hf_to_gguf.py itself
QUANTIZER_TYPES = (  # llama.cpp's quantizer, without an importance matrix (the IQ types need one)
    "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s",
    "q5_k_m", "q6_k",
)
# TGI's QUANTIZE values with an honest GGUF equivalent: (type, why)
TGI_MAPPED = {
    "bitsandbytes": ("q8_0", "LLM.int8()'s 8-bit weights"),
    "eetq": ("q8_0", "EETQ's 8-bit weights"),
    "fp8": ("q8_0", "8-bit weights (the CPU engine has no FP8)"),
    "bitsandbytes-nf4": ("q4_0", "4-bit NF4 blocks"),
    "bitsandbytes-fp4": ("q4_0", "4-bit FP4 blocks"),
}
# TGI's values that say how the checkpoint itself is quantized.
TGI_CHECKPOINT_FORMATS = frozenset({"gptq", "awq", "marlin", "exl2", "compressed-tensors"})
SETTINGS = ("HF_MODEL_QUANTIZE", "QUANTIZE")


@dataclass(frozen=True)
class Precision:
    outtype: str  # convert_hf_to_gguf.py's --outtype
    quantize: str = ""  # a type for llama.cpp's quantizer afterwards; "" when the converter's output is served
    note: str = ""  # how the setting was read, for the log

    @property
    def name(self) -> str:
        """The type the served GGUF has (part of the cache key and of the file's name)."""
        return self.quantize or self.outtype


def setting(environment: dict[str, str]) -> str:
    """The quantization a container's environment asks for ("" for none)."""
    return next((environment[k].strip() for k in SETTINGS if environment.get(k, "").strip()), "")


def resolve(value: str, dtype: str) -> Precision:
    """The precision for `value` (HF_MODEL_QUANTIZE) on a checkpoint stored as `dtype` ("" when unknown).
    ValueError, naming the accepted values, for anything else."""
    native = FLOATS.get(dtype, "f16")
    asked = value.strip().lower()
    if not asked:
        note = "" if dtype in FLOATS else "config.json names no float dtype: serving F16"
        return Precision(native, note=note)
    if asked in FLOATS:
        asked = FLOATS[asked]
    if asked in CONVERTER_TYPES:
        return Precision(asked)
    if asked in QUANTIZER_TYPES:
        return Precision(native, asked)
    if asked in TGI_MAPPED:
        gguf_type, what = TGI_MAPPED[asked]
        return Precision(*_split(gguf_type, native), note=f"QUANTIZE={value} ({what}) is served as GGUF {gguf_type}")
    if asked in TGI_CHECKPOINT_FORMATS:
        return Precision(native, note=f"QUANTIZE={value} describes the checkpoint's own format: it is dequantized "
                                      f"and served as {native}; set HF_MODEL_QUANTIZE=q4_k_m for a smaller model")
    accepted = ", ".join([*sorted(CONVERTER_TYPES), *QUANTIZER_TYPES, *TGI_MAPPED])
    raise ValueError(f"HF_MODEL_QUANTIZE={value!r} is not a precision pier knows: use one of {accepted} (or unset it "
                     "for the checkpoint's own precision).")


def _split(gguf_type: str, native: str) -> tuple[str, str]:
    return (gguf_type, "") if gguf_type in CONVERTER_TYPES else (native, gguf_type)
