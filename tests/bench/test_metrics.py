"""The metric definitions on hand-made timelines: vLLM's TTFT/TPOT/ITL/E2EL/goodput and llmperf's fields."""

from __future__ import annotations

import math

import pytest

from pier.bench.metrics import Distribution, Slo, cost_per_million_tokens, is_good, summarize, tpot
from pier.bench.request_record import RequestRecord


def timeline(
    *token_times: float, tokens: int | None = None, end: float | None = None, inputs: int = 10, error: str | None = None
) -> RequestRecord:
    record = RequestRecord(
        index=0,
        conversation=0,
        round=0,
        token_times=list(token_times),
        end=end if end is not None else (token_times[-1] if token_times else 0.0),
        output_tokens=len(token_times) if tokens is None else tokens,
        input_tokens=inputs,
    )
    if error:
        record.fail(error, "failed")
    return record


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([], {"count": 0, "mean": 0.0, "std": 0.0, "sample_std": 0.0, "min": 0.0, "max": 0.0, 50: 0.0, 99: 0.0}),
        ([2.0], {"count": 1, "mean": 2.0, "std": 0.0, "sample_std": 0.0, "min": 2.0, "max": 2.0, 50: 2.0, 99: 2.0}),
        # linear interpolation between order statistics: rank (n - 1) * p / 100
        (
            [1.0, 2.0, 3.0, 4.0],
            {
                "count": 4,
                "mean": 2.5,
                "std": math.sqrt(1.25),
                "sample_std": math.sqrt(5 / 3),
                "min": 1.0,
                "max": 4.0,
                25: 1.75,
                50: 2.5,
                75: 3.25,
                90: 3.7,
                95: 3.85,
                99: 3.97,
            },
        ),
        ([5.0, 1.0, 3.0], {"count": 3, "mean": 3.0, 50: 3.0, 25: 2.0, 75: 4.0, 99: 4.96}),
    ],
)
def test_distribution(samples: list[float], expected: dict[str | int, float]) -> None:
    d = Distribution.of(samples)
    for key, value in expected.items():
        actual = d.percentiles[key] if isinstance(key, int) else getattr(d, key)
        assert actual == pytest.approx(value), key


@pytest.mark.parametrize(
    ("record", "ttft", "latency", "itl", "expected_tpot"),
    [
        # one token per chunk: TPOT is the mean gap after the first token
        (timeline(0.5, 0.6, 0.7, 0.9), 0.5, 0.9, [0.1, 0.1, 0.2], 0.4 / 3),
        # the server bundled 6 tokens into 3 chunks (usage says 6): TPOT divides by tokens, ITL stays per chunk
        (timeline(0.2, 0.5, 0.8, tokens=6), 0.2, 0.8, [0.3, 0.3], 0.6 / 5),
        # a single output token has no TPOT
        (timeline(0.3), 0.3, 0.3, [], None),
        # the trailing usage event and [DONE] come after the last token: E2EL stops at the last token
        (timeline(0.1, 0.2, end=0.25), 0.1, 0.2, [0.1], 0.1),
    ],
)
def test_request_timeline(
    record: RequestRecord, ttft: float, latency: float, itl: list[float], expected_tpot: float | None
) -> None:
    assert record.ttft == pytest.approx(ttft)
    assert record.latency == pytest.approx(latency)
    assert record.itl == pytest.approx(itl)
    assert tpot(record) == (None if expected_tpot is None else pytest.approx(expected_tpot))


def test_summary_counts_throughputs_and_pooled_itl() -> None:
    records = [
        timeline(0.1, 0.2, 0.3, inputs=20),  # 3 tokens
        timeline(0.2, 0.6, tokens=5, inputs=30, end=0.7),  # 5 tokens in 2 chunks
        timeline(error="500"),
        timeline(0.4, error="stream_cut"),  # failed requests count nowhere but in errors
        timeline(error="500"),
    ]
    m = summarize(records, duration_s=2.0)
    assert (m.started, m.completed, m.failed) == (5, 2, 3)
    assert m.errors_by_code == {"500": 2, "stream_cut": 1}
    assert m.success_rate == pytest.approx(0.4)
    assert m.error_rate == pytest.approx(0.6)
    assert (m.total_input_tokens, m.total_output_tokens) == (50, 8)
    assert m.request_throughput == pytest.approx(1.0)
    assert m.output_throughput == pytest.approx(4.0)
    assert m.total_token_throughput == pytest.approx(29.0)
    assert m.ttft.mean == pytest.approx(0.15)
    assert m.e2el.max == pytest.approx(0.6)
    assert m.itl.count == 3  # every gap of every successful request, pooled
    assert m.itl.mean == pytest.approx((0.1 + 0.1 + 0.4) / 3)
    assert m.tpot.mean == pytest.approx((0.1 + 0.1) / 2)  # (0.3-0.1)/2 and (0.6-0.2)/4
    assert m.request_goodput is None  # no SLO: goodput undefined, as in vLLM


def test_llmperf_per_request_fields() -> None:
    m = summarize([timeline(0.2, 0.4, 0.6, 0.8, end=1.0)], duration_s=1.0)
    # llmperf: sum of gaps from the start through the last token (TTFT included) / output tokens
    assert m.llmperf_inter_token_latency.mean == pytest.approx(0.8 / 4)
    assert m.llmperf_end_to_end_latency.mean == pytest.approx(1.0)  # until the response is complete
    assert m.request_output_throughput.mean == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("slo", "good"),
    [
        (Slo(ttft_s=0.25), [True, True, False]),
        (Slo(tpot_s=0.1), [True, False, True]),  # a one-token request's TPOT counts as 0
        (Slo(ttft_s=0.25, tpot_s=0.1), [True, False, False]),
        (Slo(e2el_s=0.5), [True, False, True]),
        (Slo(ttft_s=1.0, tpot_s=1.0, e2el_s=1.0), [True, True, True]),
    ],
)
def test_goodput(slo: Slo, good: list[bool]) -> None:
    records = [timeline(0.1, 0.2, 0.3), timeline(0.2, 0.8), timeline(0.4)]
    assert [is_good(r, slo) for r in records] == good
    m = summarize([*records, timeline(error="500")], duration_s=2.0, slo=slo)
    assert m.good_requests == sum(good)
    assert m.request_goodput == pytest.approx(sum(good) / 2.0)


def test_failed_request_is_never_good() -> None:
    assert not is_good(timeline(0.1, error="500"), Slo(ttft_s=1.0))


@pytest.mark.parametrize(
    ("usd_per_hour", "tokens_per_s", "expected"),
    [(3.6, 1000.0, 1.0), (1.0, 1.0, 1e6 / 3600), (5.0, 0.0, None)],
)
def test_cost_per_million_tokens(usd_per_hour: float, tokens_per_s: float, expected: float | None) -> None:
    cost = cost_per_million_tokens(usd_per_hour, tokens_per_s)
    assert cost == (None if expected is None else pytest.approx(expected))


def test_empty_run_reports_zeros() -> None:
    m = summarize([], duration_s=0.0)
    assert (m.started, m.request_throughput, m.success_rate, m.ttft.count) == (0, 0.0, 0.0, 0)


def test_slo_from_milliseconds() -> None:
    assert Slo.from_ms(250, None, 2000) == Slo(ttft_s=0.25, tpot_s=None, e2el_s=2.0)
    assert not Slo.from_ms(None, None, None).active
