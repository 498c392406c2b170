"""Tables, JSON and plots from made-up runs: two servers compared, closed and open loop, no server needed."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from pier.bench.calibration import PromptTokens
from pier.bench.compare import compare
from pier.bench.engine_steps import EngineSteps
from pier.bench.metrics import summarize
from pier.bench.options import Api, BenchOptions, Level
from pier.bench.plots import LATENCY_VS_THROUGHPUT, THROUGHPUT_VS_CONCURRENCY, THROUGHPUT_VS_RATE, write_plots
from pier.bench.pricing import resolve_price
from pier.bench.report import print_report, run_json, token_source
from pier.bench.request_record import RequestRecord
from pier.bench.result import BenchResult, RunResult, TargetInfo
from pier.bench.vocabulary import TokenPool

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TOKENS = PromptTokens(TokenPool("words", words=("a",), source="test"), overhead=1, verified=True)
LEVELS = [Level("concurrency", 1), Level("concurrency", 4), Level("rate", 2.0)]


def target(label: str) -> TargetInfo:
    return TargetInfo(label, f"http://{label}/v1/completions", Api.OPENAI_COMPLETIONS, "m", TOKENS)


def run(info: TargetInfo, level: Level, repeat: int, step: float) -> RunResult:
    records = []
    for i in range(4):
        times = [0.05 * level.value + step * k for k in range(1, 5)]
        records.append(
            RequestRecord(
                i,
                i,
                0,
                start=float(i),
                token_times=times,
                end=times[-1],
                output_tokens=4,
                output_tokens_source="usage",
                input_tokens=9,
                input_tokens_source="usage",
            )
        )
    records.append(RequestRecord(4, 4, 0, error_code="500", error_message="boom"))
    return RunResult(info, level, repeat, 0.0, 0.0, records, summarize(records, duration_s=1.0 / level.value))


def result() -> BenchResult:
    a, b = target("A"), target("B")
    runs = [
        run(t, level, repeat, step)
        for level in LEVELS
        for repeat in range(2)
        for t, step in ((a, 0.01 + repeat / 1000), (b, 0.02))
    ]
    options = BenchOptions(target="http://A", compare="http://B", concurrency=(1, 4), rates=(2.0,), slo_ttft_ms=100)
    return BenchResult(options, [a, b], runs, compare(runs, a, b, LEVELS), resolve_price(1.8, None, 1))


def test_plots_are_pngs(tmp_path: Path) -> None:
    written = write_plots(result(), tmp_path)
    assert [p.name for p in written] == [THROUGHPUT_VS_CONCURRENCY, THROUGHPUT_VS_RATE, LATENCY_VS_THROUGHPUT]
    for path in written:
        assert path.read_bytes().startswith(PNG_MAGIC)


def test_comparison_ratios() -> None:
    comparison = result().comparisons[0]
    tpot = next(m for m in comparison.metrics if m.name == "p50_tpot_ms")
    assert tpot.a.low < tpot.a.high  # the repeats differ; the spread shows it
    assert tpot.ratio is not None and tpot.ratio > 1  # B is slower per token


def test_open_loop_run_json_names_its_rate() -> None:
    bench = result()
    fields = run_json(bench.runs[-1], bench)
    assert (fields["mode"], fields["num_concurrent_requests"], fields["request_rate"]) == ("rate", None, 2.0)
    assert fields["results_error_code_frequency"] == {"500": 1}
    assert fields["cost_per_million_output_tokens_usd"] > 0


def test_report_prints_tables() -> None:
    console = Console(record=True, width=200)
    print_report(result(), console)
    text = console.export_text()
    assert "A/B over 2 interleaved repeats: median [min–max]" in text
    assert "500×1" in text and "B/A" in text
    assert "goodput req/s" in text  # shown when an SLO is set


def test_the_engine_s_steps_are_printed_and_written_for_runs_against_pier() -> None:
    bench = result()
    after = {("pier_engine_step_seconds", "decode"): {0.001: 2.0, 0.002: 10.0, math.inf: 10.0},
             ("pier_engine_step_seconds", "mixed"): {0.002: 0.0, 0.004: 4.0, math.inf: 4.0}}
    bench.runs[0] = replace(bench.runs[0], engine=EngineSteps.between({}, after))
    console = Console(record=True, width=250)
    print_report(bench, console)
    text = console.export_text()
    assert "engine steps" in text and "1.4 / 2.0 (10)" in text and "3.0 / 4.0 (4)" in text
    assert "2.18×" in text  # a mixed step's p50 over a decode step's: 3.0 / 1.375
    steps = run_json(bench.runs[0], bench)["engine_steps"]
    assert steps["step"]["decode"] == {"steps": 10, "p50_ms": pytest.approx(1.375), "p99_ms": pytest.approx(1.9875)}
    assert steps["step"]["prompt"] == {"steps": 0, "p50_ms": None, "p99_ms": None}
    assert steps["mixed_over_decode_p50"] == pytest.approx(3.0 / 1.375)
    assert run_json(bench.runs[1], bench)["engine_steps"] is None  # a run against a server without them


def test_no_engine_table_without_pier_runs() -> None:
    console = Console(record=True, width=200)
    print_report(result(), console)
    assert "engine steps" not in console.export_text()


def test_token_source() -> None:
    assert token_source([]) is None
    assert token_source(["usage", "usage"]) == "usage"
    assert token_source(["usage", "chunks"]) == "mixed"


def test_a_target_that_answered_nothing_says_why_in_one_line() -> None:
    """The error column is cut to a few characters on a narrow terminal: the first failure is said in full."""
    info = target("A")
    failed = [RequestRecord(i, i, 0, error_code="400", error_message="Inference Component Name header is required")
              for i in range(2)]
    runs = [RunResult(info, level, 0, 0.0, 0.0, failed, summarize(failed, duration_s=1.0)) for level in LEVELS[:2]]
    bench = BenchResult(BenchOptions(target="http://A/v1/completions", concurrency=(1, 4)), [info], runs, [], None)
    console = Console(record=True, width=80)
    print_report(bench, console)
    assert ("error: no request to http://A/v1/completions was answered: 400: Inference Component Name header is "
            "required") in " ".join(console.export_text().split())
    console = Console(record=True, width=200)
    print_report(result(), console)
    assert "was answered" not in console.export_text()  # a target that answered some is only counted
