"""A conversion's progress, disk space and failures as people read them."""

from __future__ import annotations

import pytest

from pier.control.fetch.conversion_report import failure_reason, progress_of, space_needed
from pier.control.fetch.precision import Precision


@pytest.mark.parametrize(("line", "step"), [
    ("INFO:hf-to-gguf:gguf: indexing model part 'model-00003-of-00006.safetensors'", "reading shard 3 of 6"),
    ("INFO:hf-to-gguf:gguf: indexing model part 'model.safetensors'", "reading model.safetensors"),
    ("Writing:  45%|████▌     | 1.20G/2.65G [00:03<00:04, 300Mbyte/s]", "converting: 45% written"),
    ("[  12/ 201]                 blk.1.attn_q.weight - [ 2048,  2048,     1,     1], type =    f16, ",
     "quantizing: tensor 12 of 201"),
    ("INFO:hf-to-gguf:Loading model: tiny", ""),
])
def test_progress_read_off_the_output(line: str, step: str) -> None:
    assert progress_of(line) == step


MB = 2**20


@pytest.mark.parametrize(("weights", "dtype", "method", "wanted", "about_mb"), [
    (1000 * MB, "bfloat16", "", Precision("bf16"), 1000),  # same size out
    (1000 * MB, "float32", "", Precision("f32", "q4_k_m"), 1000 + 151),  # f32 first, then the quantized one
    (1000 * MB, "bfloat16", "", Precision("q8_0"), 531),
    (500 * MB, "bfloat16", "fp8", Precision("bf16"), 1000),  # dequantized: twice the FP8 checkpoint
])
def test_disk_space_counts_every_file_written(weights: int, dtype: str, method: str, wanted: Precision,
                                              about_mb: int) -> None:
    needed = space_needed(weights, dtype, method, wanted) / MB
    assert about_mb * 1.05 + 64 - 2 <= needed <= about_mb * 1.05 + 64 + 2


@pytest.mark.parametrize(("tail", "code", "says"), [
    (["NotImplementedError: Architecture 'FancyNetForCausalLM' not supported!"], 1,
     "hf://o/r is a FancyNetForCausalLM, an architecture llama.cpp's converter does not know: serve a GGUF"),
    (["INFO:hf-to-gguf:Model architecture: FancyNetForCausalLM", "ERROR:hf-to-gguf:Model FancyNetForCausalLM is not "
      "supported"], 1, "hf://o/r is a FancyNetForCausalLM, an architecture llama.cpp's converter does not know"),
    (["WARNING:hf-to-gguf:** WARNING: The BPE pre-tokenizer was not recognized!",
      "NotImplementedError: BPE pre-tokenizer was not recognized - update get_vocab_base_pre()"], 1,
     "has a BPE pre-tokenizer llama.cpp's converter does not recognize"),
    (["NotImplementedError: Quant method is not yet supported: 'hqq'"], 1,
     "cannot dequantize (NotImplementedError: Quant method is not yet supported: 'hqq')"),
    (["INFO:hf-to-gguf:blk.0"], -9, "ran out of memory"),
    (["Traceback (most recent call last):", '  File "x.py", line 1', "ValueError: Can not map tensor 'x.weight'",
      "INFO:trailing"], 1, "failed: ValueError: Can not map tensor 'x.weight'. Serve a GGUF"),
])
def test_failures_name_the_cause_and_the_fix(tail: list[str], code: int, says: str) -> None:
    assert says in failure_reason(tail, code, "LlamaForCausalLM", "hf://o/r")
