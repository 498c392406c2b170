"""The KV cache type's arithmetic and the refusals llama.cpp would otherwise give without a reason (pure)."""

from __future__ import annotations

import pytest

from pier.engine.kv_type import KV_TYPE_NAMES, KvShape, kv_type_problem, row_bytes

BENCH_360M = KvShape(n_layer=32, k_width=320, v_width=320, k_head=64, v_head=64)  # 5 KV heads of 64


@pytest.mark.parametrize(
    ("kv_type", "width", "expected"),
    [("f32", 64, 256), ("f16", 64, 128), ("q8_0", 64, 68), ("q4_0", 64, 36), ("q8_0", 40, 68), ("q4_0", 1, 18)],
)
def test_a_row_is_whole_blocks(kv_type: str, width: int, expected: int) -> None:
    assert row_bytes(kv_type, width) == expected


@pytest.mark.parametrize(
    ("kv_type", "cell_bytes", "cells_in_64_mib"),
    [("f16", 40960, 1536), ("q8_0", 21760, 3072), ("q4_0", 11520, 5632), ("f32", 81920, 768)],
)
def test_a_cell_holds_k_and_v_of_every_layer(kv_type: str, cell_bytes: int, cells_in_64_mib: int) -> None:
    assert BENCH_360M.cell_bytes(kv_type) == cell_bytes  # f16: the 40 KB per token the host cache measures
    assert BENCH_360M.cells_in(64 << 20, kv_type) == cells_in_64_mib  # rounded down to 256


@pytest.mark.parametrize(
    ("kv_type", "flash", "shape", "fragment"),
    [
        ("f16", False, None, None),
        ("f32", None, None, None),
        ("q8_0", None, BENCH_360M, None),  # llama.cpp turns flash attention on for it
        ("q4_0", True, BENCH_360M, None),
        ("q8_0", False, None, "only inside flash attention: turn flash attention on"),
        ("q4_0", False, BENCH_360M, "PIER_FLASH_ATTENTION=true"),
        ("q8_0", None, KvShape(2, 32, 32, 16, 16), "blocks of 32 values, which do not divide"),
        ("bf8", None, None, "use one of f32, f16, q8_0, q4_0"),
    ],
)
def test_problems_say_how_to_fix_them(kv_type: str, flash: bool | None, shape: KvShape | None,
                                      fragment: str | None) -> None:
    problem = kv_type_problem(kv_type, flash, shape)
    if fragment is None:
        assert problem is None
    else:
        assert problem is not None and fragment in problem


def test_every_named_type_has_a_layout() -> None:
    assert KV_TYPE_NAMES == ("f32", "f16", "q8_0", "q4_0")
    assert all(BENCH_360M.cell_bytes(t) > 0 for t in KV_TYPE_NAMES)
