"""The bursts benchmark's pure parts: rates from capacities, seeded Poisson arrivals, the request mix and the
short/long split of the metrics."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from bursts import (
    LLAMA,
    PIER,
    Kind,
    Mix,
    Planned,
    Run,
    arrival_times,
    by_kind,
    engine_table,
    keep,
    level_rates,
    ratio_table,
    request_mix,
    results_table,
    schedule,
)
from engine_steps import EngineSteps

from pier.bench.request_record import RequestRecord


@pytest.mark.parametrize(
    ("capacities", "fractions", "expected"),
    [
        ({"pier": 2.0, "llama-server": 1.0}, (0.5, 0.7, 0.9), [0.5, 0.7, 0.9]),
        ({"pier": 0.8, "llama-server": 1.6}, (0.5, 0.9), [0.4, 0.72]),
        ({"pier": 3.0}, (1.0,), [3.0]),
    ],
)
def test_rates_are_fractions_of_the_lower_capacity(
    capacities: dict[str, float], fractions: tuple[float, ...], expected: list[float]
) -> None:
    assert level_rates(capacities, fractions) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("capacities", "fractions", "message"),
    [
        ({}, (0.5,), "no capacity"),
        ({"pier": 1.0, "llama-server": 0.0}, (0.5,), "completed no request"),
        ({"pier": 1.0}, (0.5, 0.0), "must be positive"),
    ],
)
def test_rates_refuse_what_gives_no_load(
    capacities: dict[str, float], fractions: tuple[float, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        level_rates(capacities, fractions)


@pytest.mark.parametrize(("rate", "seconds"), [(0.5, 600.0), (2.0, 300.0), (10.0, 100.0)])
def test_arrivals_are_poisson_at_the_rate(rate: float, seconds: float) -> None:
    times = arrival_times(rate, seconds, "s")
    assert times[0] == 0.0
    assert all(a < b for a, b in itertools.pairwise(times))
    assert times[-1] < seconds
    # hundreds of arrivals: the count is within 4 standard deviations (sqrt(n)) of rate * seconds
    expected = rate * seconds
    assert abs(len(times) - expected) < 4 * expected**0.5
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert sum(gaps) / len(gaps) == pytest.approx(1 / rate, rel=0.2)


def test_arrivals_are_the_same_for_the_same_seed_only() -> None:
    assert arrival_times(1.0, 60.0, "a") == arrival_times(1.0, 60.0, "a")
    assert arrival_times(1.0, 60.0, "a") != arrival_times(1.0, 60.0, "b")


@pytest.mark.parametrize(("rate", "seconds"), [(0.0, 10.0), (-1.0, 10.0), (1.0, 0.0)])
def test_arrivals_refuse_no_rate_or_time(rate: float, seconds: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        arrival_times(rate, seconds, "s")


@pytest.mark.parametrize(
    ("count", "mix", "longs"),
    [
        (100, Mix(), 10),
        (25, Mix(), 2),  # round(2.5) is 2
        (7, Mix(long_share=0.0), 0),
        (5, Mix(long_share=1.0), 5),
        (40, Mix(short_len=50, long_len=900, long_share=0.25, output_min=8, output_max=8), 10),
    ],
)
def test_mix_holds_exactly_its_share_of_long_prompts(count: int, mix: Mix, longs: int) -> None:
    specs = request_mix(count, mix, "m")
    assert len(specs) == count
    assert sum(kind is Kind.LONG for kind, _, _ in specs) == longs
    for kind, input_len, output_len in specs:
        assert input_len == (mix.long_len if kind is Kind.LONG else mix.short_len)
        assert mix.output_min <= output_len <= mix.output_max
    assert request_mix(count, mix, "m") == specs


def test_mix_places_long_prompts_by_seed() -> None:
    places = {tuple(i for i, (kind, _, _) in enumerate(request_mix(50, Mix(), seed)) if kind is Kind.LONG)
              for seed in ("a", "b", "c")}
    assert len(places) == 3


def test_schedule_lays_the_mix_over_the_arrivals() -> None:
    plan = schedule(2.0, 30.0, Mix(), "s")
    assert [p.at for p in plan] == arrival_times(2.0, 30.0, "s")
    assert [(p.kind, p.input_len, p.output_len) for p in plan] == request_mix(len(plan), Mix(), "s")


def answered(ttft: float, tokens: int = 3, gap: float = 0.1) -> RequestRecord:
    record = RequestRecord(index=0, conversation=0, round=0)
    record.token_times = [ttft + i * gap for i in range(tokens)]
    record.output_tokens = tokens
    record.end = record.token_times[-1]
    return record


def failed() -> RequestRecord:
    record = RequestRecord(index=0, conversation=0, round=0)
    record.fail("timeout", "no answer")
    return record


@pytest.mark.parametrize(
    ("kinds", "records", "ttft_p50", "failed_count"),
    [
        # a short prompt stuck behind a long one: the short TTFT's median shows it, the long one is apart
        ((Kind.SHORT, Kind.LONG, Kind.SHORT, Kind.SHORT), (answered(0.1), answered(5.0), answered(4.0),
                                                           answered(0.2)),
         {"all": 2.1, "short": 0.2, "long": 5.0}, {"all": 0, "short": 0, "long": 0}),
        ((Kind.SHORT, Kind.LONG, Kind.LONG), (failed(), answered(3.0), answered(1.0)),
         {"all": 2.0, "short": 0.0, "long": 2.0}, {"all": 1, "short": 1, "long": 0}),
    ],
)
def test_split_by_kind(kinds: tuple[Kind, ...], records: tuple[RequestRecord, ...], ttft_p50: dict[str, float],
                       failed_count: dict[str, int]) -> None:
    plan = [Planned(float(i), kind, 1, 3) for i, kind in enumerate(kinds)]
    split = by_kind(records, plan, 10.0)
    assert {k: m.ttft.median for k, m in split.items()} == pytest.approx(ttft_p50)
    assert {k: m.failed for k, m in split.items()} == failed_count
    assert split["all"].request_throughput == pytest.approx(sum(r.ok for r in records) / 10.0)


def test_split_refuses_records_that_do_not_match_the_plan() -> None:
    with pytest.raises(ValueError, match="1 records for 2"):
        by_kind([answered(0.1)], [Planned(0.0, Kind.SHORT, 1, 3), Planned(1.0, Kind.LONG, 1, 3)], 1.0)


def run(server: str, short_ttft: float, long_ttft: float | None, repeat: int = 0) -> Run:
    kinds = [Kind.SHORT] + ([Kind.LONG] if long_ttft is not None else [])
    records = [answered(short_ttft)] + ([answered(long_ttft)] if long_ttft is not None else [])
    plan = [Planned(0.0, kind, 1, 3) for kind in kinds]
    return Run(server, 0.5, 1.0, repeat, by_kind(records, plan, 10.0), 0.0)


@pytest.mark.parametrize(
    ("pier", "llama", "row"),
    [
        ((1.0, None), (2.0, None), "| 50% | 0.50x (0.50) | 0.50x (0.50) | met |"),
        ((2.0, None), (2.0, None), "| 50% | 1.00x (1.00) | 1.00x (1.00) | met |"),
        ((1.0, 6.0), (1.0, 3.0), "| 50% | 2.00x (2.00) | 1.00x (1.00) | **missed** |"),
    ],
)
def test_ratio_of_ttft_p99_against_the_target(
    pier: tuple[float, float | None], llama: tuple[float, float | None], row: str
) -> None:
    assert ratio_table([run(PIER, *pier), run(LLAMA, *llama)], (0.5,))[-1] == row


def test_results_show_a_dash_for_a_kind_with_no_request() -> None:
    lines = results_table([run(PIER, 1.0, None), run(LLAMA, 1.0, 4.0)], [PIER, LLAMA], (0.5,))
    pier, llama = (line.split(" | ") for line in lines[2:])
    assert pier[4] == "– / –"  # the long prompts' TTFT p50 / p99: none ran
    assert llama[4] == "4000 / 4000"


def test_records_keep_every_request_with_its_kind(tmp_path: Path) -> None:
    plan = [Planned(0.0, Kind.SHORT, 100, 32), Planned(1.5, Kind.LONG, 1500, 64)]
    records = [answered(0.25), failed()]
    out = tmp_path / "records.jsonl"
    keep(out, Run(PIER, 0.7, 1.0, 1, by_kind(records, plan, 10.0), 0.0), plan, records)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["kind"], x["at"], x["ttft"], x["error"]) for x in lines] == [("short", 0.0, 0.25, None),
                                                                           ("long", 1.5, None, "timeout")]
    assert {(x["server"], x["level"], x["repeat"]) for x in lines} == {(PIER, 0.7, 1)}


def test_engine_table_sets_mixed_steps_against_decode_steps() -> None:
    decode = {0.001: 0.0, 0.002: 100.0, math.inf: 100.0}
    mixed = {0.001: 0.0, 0.002: 0.0, 0.005: 10.0, math.inf: 10.0}
    after = {("pier_engine_step_seconds", "decode"): decode, ("pier_engine_step_seconds", "mixed"): mixed}
    measured = replace(run(PIER, 1.0, None), engine=EngineSteps.between({}, after))
    lines = engine_table([measured, run(LLAMA, 1.0, None)], [PIER, LLAMA], (0.5,))
    assert len(lines) == 3  # llama-server has no engine figures: no row
    cells = lines[2].split(" | ")
    assert cells[2] == "1.5 / 2.0 (100)" and cells[3] == "3.5 / 5.0 (10)"
    assert cells[4] == f"{0.00497 / 0.0015:.1f}x" and cells[5] == "0"


def test_engine_table_is_left_out_without_pier_figures() -> None:
    assert engine_table([run(PIER, 1.0, None)], [PIER], (0.5,)) == []
