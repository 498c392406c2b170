"""TGI's HF_MODEL_QUANTIZE against a GGUF, whose weights are stored quantized and served as stored: a value it
cannot honour is said in the copy's log with the way to the weights asked for (it was ignored without a word);
one naming the GGUF's own type is honoured as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.server.quantization import file_type_name, quantize_warning, warn_of_quantize
from tests.server.processes import ContainerProcess


@pytest.mark.parametrize(("code", "name"), [(0, "F32"), (1, "F16"), (7, "Q8_0"), (15, "Q4_K_M"), (32, "BF16"),
                                            (10_000, None)])
def test_a_file_type_s_name(code: int, name: str | None) -> None:
    assert file_type_name(code) == name


@pytest.mark.parametrize(("value", "stored_as", "warned"), [
    (None, "Q4_K_M", False),
    ("", "Q4_K_M", False),
    ("bitsandbytes", "Q4_K_M", True),
    ("gptq", "Q8_0", True),
    ("awq", None, True),
    ("fp8", "F16", True),
    ("q4_k_m", "Q4_K_M", False),  # names what it is: honoured
    ("Q8-0", "Q8_0", False),
    ("q8_0", "Q4_K_M", True),  # llama.cpp does not requantize at load
])
def test_what_a_gguf_cannot_honour_is_said(value: str | None, stored_as: str | None, warned: bool) -> None:
    warning = quantize_warning(value, "m.gguf", stored_as)
    assert (warning is not None) == warned
    if warning is not None:
        assert warning.startswith(f"HF_MODEL_QUANTIZE={value} is ignored: m.gguf is a GGUF whose weights are")
        assert (f"stored as {stored_as}" in warning) == (stored_as is not None)
        assert "serve a GGUF of that quantization" in warning and "remove HF_MODEL_QUANTIZE" in warning


def test_the_type_is_read_from_the_file(tiny_gguf: Path, caplog: pytest.LogCaptureFixture) -> None:
    warning = warn_of_quantize({"HF_MODEL_QUANTIZE": "bitsandbytes"}, tiny_gguf)
    assert warning is not None and f"{tiny_gguf.name} is a GGUF whose weights are stored as Q8_0" in warning
    assert warning in caplog.text
    assert warn_of_quantize({"HF_MODEL_QUANTIZE": "q8_0"}, tiny_gguf) is None
    assert warn_of_quantize({}, tiny_gguf) is None


@pytest.mark.e2e
def test_a_copy_says_so_in_its_log(tiny_gguf: Path, tmp_path: Path) -> None:
    log = tmp_path / "copy.log"
    with ContainerProcess(tiny_gguf, log, HF_MODEL_QUANTIZE="bitsandbytes") as copy:
        copy.wait_ready()
    said = " ".join(log.read_text().split())
    assert "WARNING" in said and "HF_MODEL_QUANTIZE=bitsandbytes is ignored" in said and "stored as Q8_0" in said
