"""The crowd benchmark's accounting (benchmarks/crowd_table.py): levels, every request counted, the seed's table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pier.bench.request_record import RequestRecord


def _load() -> ModuleType:
    """benchmarks/ is a folder of scripts, not a package: its pure module is loaded from its file."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "crowd_table.py"
    spec = importlib.util.spec_from_file_location("crowd_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("crowd_table", module)
    spec.loader.exec_module(module)
    return module


crowd_table = _load()
Row = crowd_table.Row


def record(end: float, error: str | None = None, message: str = "") -> RequestRecord:
    r = RequestRecord(index=0, conversation=0, round=0, end=end)
    if error is not None:
        r.fail(error, message)
    return r


@pytest.mark.parametrize(("text", "levels"), [
    ("25,50,100", (25, 50, 100)),
    (" 4, 16 ", (4, 16)),
    ("500,25", (500, 25)),  # the order given is the order run
])
def test_levels_parse(text: str, levels: tuple[int, ...]) -> None:
    assert crowd_table.parse_levels(text) == levels


@pytest.mark.parametrize("text", ["", "0,25", "-1", "ten", "2.5"])
def test_bad_levels_say_how_to_write_them(text: str) -> None:
    with pytest.raises(ValueError, match="--levels"):
        crowd_table.parse_levels(text)


@pytest.mark.parametrize(("records", "seconds", "expected"), [
    # (requests, succeeded, req/s, median, p99, success text)
    ([record(1.0), record(2.0), record(3.0)], 3.0, (3, 3, 1.0, 2.0, 2.98, "100%")),
    ([record(1.0), record(30.0, "429", "busy"), record(3.0), record(300.0, "timeout", "slow")], 10.0,
     (4, 2, 0.2, 2.0, 2.98, "50.0%")),
    ([record(1.0, "connection_error", "refused")], 1.0, (1, 0, 0.0, None, None, "0.0%")),
    ([record(1.0)] * 999 + [record(1.0, "500", "boom")], 100.0, (1000, 999, 9.99, 1.0, 1.0, "99.9%")),
    ([], 0.0, (0, 0, 0.0, None, None, "0.0%")),
])
def test_every_request_counts(records: list[RequestRecord], seconds: float,
                              expected: tuple[int, int, float, float | None, float | None, str]) -> None:
    row = Row.of(8, records, seconds)
    p99 = None if row.p99_s is None else round(row.p99_s, 2)
    assert (row.requests, row.succeeded, round(row.throughput, 3), row.median_s, p99,
            crowd_table.success_text(row)) == expected


def test_failures_are_listed_by_reason_most_frequent_first() -> None:
    records = [record(1.0, "timeout", "t1"), record(1.0, "429", "q"), record(1.0, "timeout", "t2"), record(1.0)]
    assert Row.of(4, records, 1.0).failures == (("timeout", 2, "t1"), ("429", 1, "q"))
    lines = crowd_table.failure_lines("pier", [Row.of(4, records, 1.0), Row.of(8, [record(1.0)], 1.0)])
    assert lines == ["- pier, 4 users: 2 × `timeout`: t1", "- pier, 4 users: 1 × `429`: q"]


def test_the_seed_table_and_ratios() -> None:
    ours = [Row.of(25, [record(2.0), record(4.0)], 2.0), Row.of(50, [record(8.0)], 4.0)]
    theirs = [Row.of(25, [record(4.0)], 2.0), Row.of(100, [record(1.0)], 1.0)]
    table = crowd_table.seed_table("pier", ours)
    assert table[0].startswith("| Model | Concurrent Users | requests | throughput (req/sec) | med. latency")
    assert table[2:] == ["| pier | 25 | 2 | 1.00/s | 3.00s | 3.98s | 100% |",
                         "| pier | 50 | 1 | 0.25/s | 8.00s | 8.00s | 100% |"]
    # only the levels both ran; req/s 1.00 vs 0.50, median 3 s vs 4 s
    assert crowd_table.ratio_lines(ours, theirs, ("pier", "llama-server")) == [
        "- 25 users: pier / llama-server req/s 2.00x, median latency 0.75x"]


def test_a_ratio_without_a_denominator_is_not_available() -> None:
    assert crowd_table.ratio(None, 1.0) == "n/a"
    assert crowd_table.ratio(1.0, 0.0) == "n/a"
