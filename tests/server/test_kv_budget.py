"""A copy's KV cache type and memory: checked and sized from the GGUF header before llama.cpp loads anything,
and (e2e) the bytes llama.cpp really stores per token, which the host-memory tier counts, match the sizing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.engine.kv_type import KvShape
from pier.env import SettingsError
from pier.server.kv_budget import kv_cells, kv_shape
from pier.server.settings import ServerSettings


def test_the_shape_comes_from_the_header(tiny_gguf: Path, small_gguf: Path) -> None:
    # TINY: 2 layers, 4 heads of 16 over 2 KV heads; SMALL: 6 layers, 8 heads of 64 over 4 KV heads
    assert kv_shape(tiny_gguf) == KvShape(n_layer=2, k_width=32, v_width=32, k_head=16, v_head=16)
    assert kv_shape(small_gguf) == KvShape(n_layer=6, k_width=256, v_width=256, k_head=64, v_head=64)


@pytest.mark.parametrize(
    ("env", "cells"),
    [
        ({}, 4096),  # the context size: no memory budget
        ({"MAX_BATCH_TOTAL_TOKENS": "2048", "PIER_KV_CACHE_TYPE": "q8_0"}, 2048),  # cells are cells
        ({"PIER_KV_CACHE_MB": "24"}, 4096),  # 6144 bytes a cell in f16
        ({"PIER_KV_CACHE_MB": "24", "PIER_KV_CACHE_TYPE": "q8_0"}, 7680),  # 3264 bytes, rounded down to 256
        ({"PIER_KV_CACHE_MB": "24", "PIER_KV_CACHE_TYPE": "q4_0"}, 14336),  # 1728 bytes
    ],
)
def test_memory_buys_more_cells_of_a_smaller_type(small_gguf: Path, env: dict[str, str], cells: int) -> None:
    assert kv_cells(ServerSettings.from_env(env), small_gguf) == cells


@pytest.mark.parametrize(
    ("model", "env", "fragment"),
    [
        ("small", {"PIER_KV_CACHE_TYPE": "q4_0", "PIER_FLASH_ATTENTION": "false"},
         "PIER_KV_CACHE_TYPE=q4_0: a q4_0 KV cache quantizes V, which llama.cpp does only inside flash attention"),
        ("tiny", {"PIER_KV_CACHE_TYPE": "q8_0"}, "do not divide this model's attention heads (16 K / 16 V"),
        ("small", {"PIER_KV_CACHE_MB": "1"}, "fewer than 256 tokens of this model's f16 KV cache: give it at least 2"),
    ],
)
def test_what_llama_cpp_would_refuse_is_refused_with_the_fix(
    tiny_gguf: Path, small_gguf: Path, model: str, env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        kv_cells(ServerSettings.from_env(env), small_gguf if model == "small" else tiny_gguf)
    assert fragment in str(caught.value)


@pytest.mark.e2e
@pytest.mark.parametrize("kv_type", ["f16", "q8_0", "q4_0"])
def test_llama_cpp_stores_what_the_sizing_counts(small_gguf: Path, kv_type: str) -> None:
    """What a saved prefix takes in host memory (the host cache's byte accounting: the state's length) is the
    cells' bytes in that type plus a small fixed header, and the engine decodes with the type."""
    from pier.engine.llama import LlamaRunner
    from pier.engine.runner import Batch

    runner = LlamaRunner(small_gguf, n_ctx=512, n_seq_max=4, n_batch=128, n_threads=2, kv_type=kv_type)
    try:
        n = 100
        logits = runner.decode(Batch(list(range(10, 10 + n)), list(range(n)), [0] * n, [False] * (n - 1) + [True]))
        assert logits.shape[0] == 1 and bool((logits[0] == logits[0]).all())  # a real row, no NaN
        saved = len(runner.save(0))
        expected = n * kv_shape(small_gguf).cell_bytes(kv_type)
        assert expected <= saved <= expected + 4096
    finally:
        runner.close()


@pytest.mark.e2e
def test_a_copy_with_a_kv_type_its_model_refuses_fails_its_load_with_the_fix(tmp_path: Path, tiny_gguf: Path) -> None:
    from tests.server.processes import ContainerProcess

    copy = ContainerProcess(tiny_gguf, tmp_path / "copy.log", PIER_KV_CACHE_TYPE="q8_0")
    try:
        assert copy.wait(60) == 1
    finally:
        copy.stop(10)
    assert "PIER_KV_CACHE_TYPE=q8_0: a q8_0 KV cache stores blocks of 32 values" in copy.output()
