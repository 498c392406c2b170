"""Cutting a step into forward passes: decode rows apart from prompt chunks once a step would be tiled."""

from __future__ import annotations

import pytest

from pier.engine.passes import FEW_ROWS, TILE_ROWS, plan_adapter_passes, plan_passes, runs


def seqs(*spans: tuple[int, int]) -> list[int]:
    """Batch seq ids from (seq id, rows) spans."""
    return [seq for seq, n in spans for _ in range(n)]


@pytest.mark.parametrize(
    ("seq_ids", "expected"),
    [
        ([], []),
        ([3], [range(0, 1)]),
        ([1, 1, 2, 3, 3, 3], [range(0, 2), range(2, 3), range(3, 6)]),
    ],
)
def test_runs(seq_ids: list[int], expected: list[range]) -> None:
    assert runs(seq_ids) == expected


EIGHT_DECODING = [(s, 1) for s in range(8)]


@pytest.mark.parametrize(
    ("name", "spans", "tiled", "expected_sizes"),
    [
        ("short step: row by row already", [*EIGHT_DECODING, (9, 55)], True, [63]),
        ("decode rows beside a prompt", [*EIGHT_DECODING, (9, 56)], True, [8, 56]),
        ("decode rows beside a long prompt", [*EIGHT_DECODING, (9, 504)], True, [8, 504]),
        ("flash attention off or quantized KV: no tiles", [*EIGHT_DECODING, (9, 504)], False, [512]),
        ("prompt chunks only", [(1, 200), (2, 300)], True, [500]),
        ("decode only, under a tile", [(s, 1) for s in range(63)], True, [63]),
        ("decode only, a tile or more", [(s, 1) for s in range(100)], True, [63, 37]),
        ("a short prompt tail counts as few rows", [(1, FEW_ROWS - 1), (2, 100)], True, [FEW_ROWS - 1, 100]),
        ("a chunk of FEW_ROWS rows is a prompt", [(1, FEW_ROWS), (2, 100)], True, [FEW_ROWS + 100]),
        ("runs stay whole across passes", [(s, 5) for s in range(26)], True, [60, 60, 10]),
    ],
)
def test_plan_passes(name: str, spans: list[tuple[int, int]], tiled: bool, expected_sizes: list[int]) -> None:
    seq_ids = seqs(*spans)
    passes = plan_passes(seq_ids, tiled)
    assert [len(p) for p in passes] == expected_sizes, name


@pytest.mark.parametrize("n_decoding", [1, 8, 63, 64, 200])
@pytest.mark.parametrize("prompt", [0, 7, 64, 300])
def test_every_row_once_whole_runs_and_no_pass_of_few_rows_is_tiled(n_decoding: int, prompt: int) -> None:
    seq_ids = seqs(*[(s, 1) for s in range(n_decoding)], (999, prompt))
    passes = plan_passes(seq_ids, tiled=True)
    assert sorted(row for p in passes for row in p) == list(range(len(seq_ids)))
    for p in passes:
        assert p == sorted(p)
        owners = {seq_ids[row] for row in p}
        assert all(seq_ids.count(s) == sum(1 for row in p if seq_ids[row] == s) for s in owners)
        if len(passes) > 1 and any(seq_ids.count(seq_ids[row]) < FEW_ROWS for row in p):
            assert len(p) < TILE_ROWS



@pytest.mark.parametrize(
    ("name", "spans", "tiled", "expected"),
    [
        ("no adapters named: one base pass", [(1, 3, None), (2, 1, None)], True, [("", [0, 1, 2, 3])]),
        ("one adapter for all", [(1, 3, "a"), (2, 1, "a")], True, [("a", [0, 1, 2, 3])]),
        ("the base (set) first, then adapters in order of first row", [(1, 2, "a"), (2, 1, ""), (3, 1, "a"),
                                                                       (4, 2, "b")], False,
         [("", [2]), ("a", [0, 1, 3]), ("b", [4, 5])]),
        ("the adapter the context is set to first", [(1, 2, "a"), (2, 1, "b:first"), (3, 1, "a")], False,
         [("b", [2]), ("a", [0, 1, 3])]),
        ("each group cut as plan_passes cuts it", [*((s, 1, "a") for s in range(8)), (9, 100, "a"), (10, 1, "b")],
         True, [("a", list(range(8))), ("a", list(range(8, 108))), ("b", [108])]),
    ],
)
def test_plan_adapter_passes(name: str, spans: list[tuple[int, int, str | None]], tiled: bool,
                             expected: list[tuple[str, list[int]]]) -> None:
    seq_ids = seqs(*((s, n) for s, n, _ in spans))
    named = [] if spans[0][2] is None else [a or "" for _, n, a in spans for _ in range(n)]
    first = next((a.split(":")[0] for a in named if a.endswith(":first")), "")
    adapters = [a.split(":")[0] for a in named]
    assert plan_adapter_passes(seq_ids, adapters, tiled, first) == expected, name
