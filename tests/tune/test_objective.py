"""The SLO and a trial's goodput (pure)."""

from __future__ import annotations

import pytest

from pier.bench.metrics import summarize
from pier.bench.request_record import RequestRecord
from pier.tune.objective import Bound, SloError, goodput, misses, parse_slo


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("ttft_p90<2s,tpot_p90<150ms", (Bound("ttft", 90, 2.0), Bound("tpot", 90, 0.15))),
        (" E2EL_p99 < 10s ", (Bound("e2el", 99, 10.0),)),
        ("itl_p50<80.5ms", (Bound("itl", 50, 0.0805),)),
        ("", ()),
    ],
)
def test_slo_reads(text: str, bounds: tuple[Bound, ...]) -> None:
    assert parse_slo(text) == pytest.approx(bounds) if bounds else parse_slo(text) == ()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("ttft<2s", "write METRIC_pPCT<VALUE(s|ms)"), ("speed_p90<2s", "use one of ttft, tpot, itl, e2el"),
     ("ttft_p80<2s", "use one of p25, p50, p75, p90, p95, p99"), ("ttft_p90<2min", "write METRIC_pPCT")],
)
def test_bad_slo_shows_the_form(text: str, fragment: str) -> None:
    with pytest.raises(SloError) as caught:
        parse_slo(text)
    assert fragment in str(caught.value)


def record(index: int, ttft: float, gap: float, n: int = 5, error: str | None = None) -> RequestRecord:
    r = RequestRecord(index=index, conversation=index, round=0)
    if error:
        r.error_code, r.error_message, r.end = error, "failed", 0.1
        return r
    r.token_times = [ttft + i * gap for i in range(n)]
    r.output_tokens, r.input_tokens, r.end = n, 10, ttft + (n - 1) * gap
    return r


def test_goodput_is_throughput_only_when_every_bound_and_request_holds() -> None:
    fast = summarize([record(i, 0.5, 0.05) for i in range(10)], duration_s=10.0)
    bounds = parse_slo("ttft_p90<1s,tpot_p90<100ms")
    assert misses(bounds, fast) == [] and goodput(bounds, fast) == fast.output_throughput == 5.0
    slow = summarize([record(i, 0.5 + i * 0.2, 0.05) for i in range(10)], duration_s=10.0)
    assert misses(bounds, slow) == ["ttft p90 2120 ms ≥ 1000 ms"] and goodput(bounds, slow) == 0.0
    failing = summarize([record(0, 0.5, 0.05), record(1, 0, 0, error="500")], duration_s=10.0)
    assert misses(bounds, failing) == ["1 of 2 requests failed (500 x1)"]
