"""HF_MODEL_QUANTIZE / QUANTIZE as TGI and the seeds write them, read into the precision a conversion makes."""

from __future__ import annotations

import pytest

from pier.control.fetch.precision import Precision, resolve, setting


@pytest.mark.parametrize(("value", "dtype", "expected"), [
    ("", "bfloat16", Precision("bf16")),
    ("", "float32", Precision("f32")),
    ("", "float16", Precision("f16")),
    ("q8_0", "bfloat16", Precision("q8_0")),
    ("Q8_0", "float32", Precision("q8_0")),
    ("f16", "float32", Precision("f16")),
    ("bfloat16", "float32", Precision("bf16")),
    ("q4_k_m", "bfloat16", Precision("bf16", "q4_k_m")),
    ("q6_k", "float32", Precision("f32", "q6_k")),
    ("q4_0", "float16", Precision("f16", "q4_0")),
])
def test_gguf_types_and_the_checkpoints_own(value: str, dtype: str, expected: Precision) -> None:
    assert resolve(value, dtype) == expected


@pytest.mark.parametrize(("value", "name", "note"), [
    ("bitsandbytes", "q8_0", "QUANTIZE=bitsandbytes (LLM.int8()'s 8-bit weights) is served as GGUF q8_0"),
    ("bitsandbytes-nf4", "q4_0", "QUANTIZE=bitsandbytes-nf4 (4-bit NF4 blocks) is served as GGUF q4_0"),
    ("bitsandbytes-fp4", "q4_0", "(4-bit FP4 blocks) is served as GGUF q4_0"),
    ("eetq", "q8_0", "EETQ's 8-bit weights"),
    ("gptq", "bf16", "describes the checkpoint's own format: it is dequantized and served as bf16"),
    ("awq", "bf16", "describes the checkpoint's own format"),
])
def test_tgi_values_are_mapped_and_say_so(value: str, name: str, note: str) -> None:
    chosen = resolve(value, "bfloat16")
    assert chosen.name == name
    assert note in chosen.note


def test_a_checkpoint_without_a_float_dtype_is_served_as_f16_and_says_so() -> None:
    assert resolve("", "") == Precision("f16", note="config.json names no float dtype: serving F16")


@pytest.mark.parametrize("value", ["q4_k_xl", "int4", "iq2_xxs", "8bit"])
def test_unknown_values_are_refused_with_the_list(value: str) -> None:
    with pytest.raises(ValueError, match=rf"HF_MODEL_QUANTIZE='{value}' is not a precision pier knows: use one of "
                                         r"bf16, f16, f32, q8_0, q4_0"):
        resolve(value, "bfloat16")


@pytest.mark.parametrize(("environment", "expected"), [
    ({}, ""),
    ({"HF_MODEL_QUANTIZE": "q4_k_m"}, "q4_k_m"),
    ({"QUANTIZE": "bitsandbytes"}, "bitsandbytes"),
    ({"HF_MODEL_QUANTIZE": " ", "QUANTIZE": "q8_0"}, "q8_0"),
    ({"HF_MODEL_QUANTIZE": "q6_k", "QUANTIZE": "q8_0"}, "q6_k"),
])
def test_the_setting_is_read_from_either_name(environment: dict[str, str], expected: str) -> None:
    assert setting(environment) == expected
