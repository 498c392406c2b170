"""The results as files and tables: summary JSON (llmperf's summary field names where llmperf has the number,
vLLM's result names for its metrics), per-request JSON (llmperf's individual-response names), rich tables."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pier import __version__
from pier.bench.engine_steps import KINDS, EngineSteps, KindFigures
from pier.bench.metrics import MS, PERCENTILES, Distribution, Metrics, cost_per_million_tokens, tpot
from pier.bench.pricing import Price
from pier.bench.request_record import RequestRecord
from pier.bench.result import BenchResult, LevelComparison, RunResult, Spread, TargetInfo

SUMMARY_FILE = "summary.json"
REQUESTS_FILE = "requests.json"
RESULTS_VERSION = "pier-bench-1"
SECONDS_PER_MINUTE = 60


# -- JSON --------------------------------------------------------------------------------------------------


def summary_json(result: BenchResult) -> dict[str, Any]:
    return {
        "version": RESULTS_VERSION,
        "pier_version": __version__,
        "name": _name(result),
        "timestamp": int(time.time()),
        "interrupted": result.interrupted,
        "options": result.options.model_dump(mode="json", exclude={"api_key"}),  # never write a secret
        "targets": [_target_json(t) for t in result.targets],
        "price": None
        if result.price is None
        else {"usd_per_hour": result.price.usd_per_hour, "source": result.price.source},
        "device": device_json(result),
        "cpu": result.cpu,  # the CPU's flags and llama.cpp build: which kernels could have made these figures
        "kernels": result.kernels,  # which each pier copy measured used, by target
        "runs": [run_json(run, result) for run in result.runs],
        "comparisons": [_comparison_json(c) for c in result.comparisons],
    }


def device_json(result: BenchResult) -> dict[str, Any]:
    """The host's GPUs: `{"kind": "gpu", "gpus": ["NVIDIA H100 80GB HBM3"], ...}` or `{"kind": "cpu", "gpus": []}`."""
    device = result.device
    return {"kind": "gpu" if device.gpus else "cpu", "gpus": [g.name for g in device.gpus],
            "memory_mb": [g.memory_mb for g in device.gpus], "description": device.describe(), "source": device.source}


def run_json(run: RunResult, result: BenchResult) -> dict[str, Any]:
    """One run as one flat object, as llmperf writes its summary."""
    return {
        **_run_identity(run, result),
        **llmperf_fields(run.metrics),
        **vllm_fields(run.metrics),
        **_extras(run, result.price),
    }


def llmperf_fields(m: Metrics) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, distribution in (
        ("inter_token_latency_s", m.llmperf_inter_token_latency),
        ("ttft_s", m.ttft),
        ("end_to_end_latency_s", m.llmperf_end_to_end_latency),
        ("request_output_throughput_token_per_s", m.request_output_throughput),
        ("number_input_tokens", m.input_tokens),
        ("number_output_tokens", m.output_tokens),
    ):
        fields |= _llmperf_distribution(f"results_{name}", distribution)
    return fields | {
        "results_num_requests_started": m.started,
        "results_error_rate": m.error_rate,
        "results_number_errors": m.failed,
        "results_error_code_frequency": dict(m.errors_by_code),
        "results_mean_output_throughput_token_per_s": m.output_throughput,
        "results_num_completed_requests": m.completed,
        "results_num_completed_requests_per_min": m.request_throughput * SECONDS_PER_MINUTE,
    }


def vllm_fields(m: Metrics) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "duration": m.duration_s,
        "completed": m.completed,
        "failed": m.failed,
        "total_input_tokens": m.total_input_tokens,
        "total_output_tokens": m.total_output_tokens,
        "request_throughput": m.request_throughput,
        "request_goodput": m.request_goodput,
        "output_throughput": m.output_throughput,
        "total_token_throughput": m.total_token_throughput,
    }
    for name, distribution in (("ttft", m.ttft), ("tpot", m.tpot), ("itl", m.itl), ("e2el", m.e2el)):
        fields |= {
            f"mean_{name}_ms": distribution.mean * MS,
            f"median_{name}_ms": distribution.median * MS,
            f"std_{name}_ms": distribution.std * MS,
        }
        fields |= {f"p{p}_{name}_ms": distribution.percentiles[p] * MS for p in PERCENTILES}
    return fields


def requests_json(result: BenchResult) -> list[dict[str, Any]]:
    return [request_json(record, run) for run in result.runs for record in run.records]


def request_json(record: RequestRecord, run: RunResult) -> dict[str, Any]:
    latency = record.latency
    return {
        "target": run.target.label,
        "mode": run.level.mode,
        "level": run.level.value,
        "repeat": run.repeat,
        "index": record.index,
        "conversation": record.conversation,
        "turn": record.round,
        "start_s": record.start - run.started,
        "error_code": record.error_code,
        "error_msg": record.error_message,
        "ttft_s": record.ttft,
        "end_to_end_latency_s": record.end,
        "inter_token_latency_s": latency / record.output_tokens if latency and record.output_tokens else None,
        "e2el_s": latency,
        "tpot_s": tpot(record),
        "itl_s": record.itl,
        "number_input_tokens": record.input_tokens,
        "number_output_tokens": record.output_tokens,
        "number_total_tokens": record.input_tokens + record.output_tokens,
        "request_output_throughput_token_per_s": record.output_tokens / record.end if record.end else None,
        "input_tokens_source": record.input_tokens_source,
        "output_tokens_source": record.output_tokens_source,
    }


def write_files(result: BenchResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    summary, requests = out / SUMMARY_FILE, out / REQUESTS_FILE
    summary.write_text(json.dumps(summary_json(result), indent=2) + "\n")
    requests.write_text(json.dumps(requests_json(result), indent=1) + "\n")
    return [summary, requests]


def _name(result: BenchResult) -> str:
    o = result.options
    return f"{o.workload.value}_{o.input_len}_{o.output_len}"


def _target_json(target: TargetInfo) -> dict[str, Any]:
    tokens = target.tokens
    return {
        "label": target.label,
        "url": target.url,
        "api": target.api.value,
        "model": target.model,
        "prompt_format": tokens.pool.kind,
        "prompt_source": tokens.pool.source,
        "prompt_overhead_tokens": tokens.overhead,
        "prompt_tokens_verified": tokens.verified,
        "warmup_errors": target.warmup_errors,
    }


def _run_identity(run: RunResult, result: BenchResult) -> dict[str, Any]:
    o = result.options
    closed = run.level.mode == "concurrency"
    return {
        "target": run.target.label,
        "url": run.target.url,
        "api": run.target.api.value,
        "model": run.target.model,
        "mode": run.level.mode,
        "level": run.level.value,
        "repeat": run.repeat,
        "started_at": run.started_at,
        "workload": o.workload.value,
        "shared_prefix_tokens": o.shared_prefix,
        "turns": o.turns if o.workload.value == "multi-turn" else 1,
        "mean_input_tokens": o.input_len,
        "stddev_input_tokens": o.input_len_stddev,
        "mean_output_tokens": o.output_len,
        "stddev_output_tokens": o.output_len_stddev,
        "num_concurrent_requests": int(run.level.value) if closed else None,
        "request_rate": run.level.value if run.level.mode == "rate" else None,
        "rate_schedule": [{"rate": r, "seconds": s} for r, s in run.level.schedule] or None,
        "copies": [{"at_s": c.at_s, "ready": c.ready} for c in run.copies] or None,
    }


def _extras(run: RunResult, price: Price | None) -> dict[str, Any]:
    m = run.metrics
    cost = None if price is None else cost_per_million_tokens(price.usd_per_hour, m.output_throughput)
    return {
        "success_rate": m.success_rate,
        "errors_by_code": dict(m.errors_by_code),
        "good_requests": m.good_requests,
        "output_tokens_source": token_source(r.output_tokens_source for r in run.records if r.ok),
        "input_tokens_source": token_source(r.input_tokens_source for r in run.records if r.ok),
        "cost_per_million_output_tokens_usd": cost,
        "engine_steps": None if run.engine is None else engine_json(run.engine),
    }


def engine_json(engine: EngineSteps) -> dict[str, Any]:
    """Per step kind: {"steps", "p50_ms", "p99_ms"} of whole steps and of their forward passes alone."""
    def kinds(figures: dict[str, KindFigures]) -> dict[str, Any]:
        return {kind: {"steps": f.steps, "p50_ms": _ms(f.p50_s), "p99_ms": _ms(f.p99_s)} for kind, f in figures.items()}

    return {"step": kinds(engine.step), "forward": kinds(engine.forward),
            "mixed_over_decode_p50": engine.mixed_over_decode()}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * MS


def token_source(sources: Any) -> str | None:
    """Where a run's token counts came from: one source, "mixed", or None when no request succeeded."""
    counts = Counter(sources)
    if not counts:
        return None
    return next(iter(counts)) if len(counts) == 1 else "mixed"


def _llmperf_distribution(prefix: str, d: Distribution) -> dict[str, Any]:
    fields = {f"{prefix}_quantiles_p{p}": d.percentiles[p] for p in PERCENTILES}
    return fields | {
        f"{prefix}_mean": d.mean,
        f"{prefix}_min": d.min,
        f"{prefix}_max": d.max,
        f"{prefix}_stddev": d.sample_std,
    }


def _comparison_json(c: LevelComparison) -> dict[str, Any]:
    return {
        "mode": c.level.mode,
        "level": c.level.value,
        "metrics": [
            {
                "name": m.name,
                "higher_is_better": m.higher_is_better,
                "ratio_b_over_a": m.ratio,
                "a": vars(m.a),
                "b": vars(m.b),
            }
            for m in c.metrics
        ],
    }


# -- tables ------------------------------------------------------------------------------------------------


def summary_table(result: BenchResult) -> Table:
    priced = result.price is not None
    table = Table(title=f"pier bench: {_name(result)} ({result.options.workload.value} workload)")
    for column in (
        "target",
        "load",
        "ok/sent",
        "req/s",
        "out tok/s",
        "TTFT p50/p99 ms",
        "TPOT p50/p99 ms",
        "ITL p50/p99 ms",
        "E2E p50 ms",
        "errors",
    ):
        table.add_column(column, justify="left" if column in ("target", "load", "errors") else "right")
    if result.slo.active:
        table.add_column("goodput req/s", justify="right")
    if priced:
        table.add_column("$/M out tok", justify="right")
    for run in result.runs:
        table.add_row(*_row(run, result.price))
    return table


def _row(run: RunResult, price: Price | None) -> list[str]:
    m = run.metrics
    errors = escape(", ".join(f"{code}×{n}" for code, n in sorted(m.errors_by_code.items())) or "-")
    row = [
        run.target.label,
        run.level.label + (f" #{run.repeat + 1}" if run.repeat else ""),
        f"{m.completed}/{m.started}",
        f"{m.request_throughput:.2f}",
        f"{m.output_throughput:.1f}",
        _pair(m.ttft),
        _pair(m.tpot),
        _pair(m.itl),
        f"{m.e2el.median * MS:.1f}",
        errors,
    ]
    if m.request_goodput is not None:
        row.append(f"{m.request_goodput:.2f}")
    if price is not None:
        cost = cost_per_million_tokens(price.usd_per_hour, m.output_throughput)
        row.append("-" if cost is None else f"{cost:.2f}")
    return row


def _pair(d: Distribution) -> str:
    return f"{d.median * MS:.1f}/{d.percentiles[99] * MS:.1f}" if d.count else "-"


def engine_table(result: BenchResult) -> Table | None:
    """The engine's own steps in each run against a pier server (none: no target exposed them)."""
    runs = [run for run in result.runs if run.engine is not None and run.engine.steps]
    if not runs:
        return None
    table = Table(title="the server's engine steps in each run (its /metrics): p50 / p99 ms (steps)",
                  caption="decode: streams only; mixed: streams and prompt tokens; prompt: prompt tokens only")
    for column in ("target", "load", *KINDS, "mixed/decode p50"):
        table.add_column(column, justify="left" if column in ("target", "load") else "right")
    for run in runs:
        assert run.engine is not None
        ratio = run.engine.mixed_over_decode()
        table.add_row(run.target.label, run.level.label + (f" #{run.repeat + 1}" if run.repeat else ""),
                      *(run.engine.cell(kind) for kind in KINDS), "-" if ratio is None else f"{ratio:.2f}×")
    return table


def comparison_table(result: BenchResult) -> Table:
    a, b = (t.label for t in result.targets[:2])
    table = Table(title=escape(f"A/B over {result.options.repeat_count} interleaved repeats: median [min–max]"))
    for column in ("load", "metric", a, b, "B/A"):
        table.add_column(column, justify="left" if column in ("load", "metric") else "right")
    for level in result.comparisons:
        for m in level.metrics:
            ratio = "-" if m.ratio is None else f"{m.ratio:.2f}×"
            table.add_row(level.level.label, m.label, _spread(m.a), _spread(m.b), ratio)
        table.add_section()
    return table


def _spread(s: Spread) -> str:
    return escape(f"{_number(s.median)} [{_number(s.low)}–{_number(s.high)}]")


def _number(value: float) -> str:
    """Three significant digits without an exponent, for values from a fraction of a millisecond to 10k tok/s."""
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if magnitude >= 10 else f"{value:.3g}"


def unanswered(result: BenchResult) -> list[str]:
    """A line for each target none of whose requests was answered, with its first failure in full: the table's
    error column holds only codes, cut short on a narrow terminal, and the fix is in the message (a server that is
    not running, an inference component to name, a model the server does not have)."""
    lines = []
    for target in result.targets:
        runs = [run for run in result.runs if run.target.label == target.label]
        if not runs or any(run.metrics.completed for run in runs):
            continue
        failed = next((r for run in runs for r in run.records if r.error_code is not None), None)
        why = f": {failed.error_code}: {failed.error_message}" if failed is not None else ""
        lines.append(f"no request to {target.url} was answered{why}")
    return lines


def print_report(result: BenchResult, console: Console) -> None:
    console.print(summary_table(result))
    if (engine := engine_table(result)) is not None:
        console.print(engine)
    if result.comparisons:
        console.print(comparison_table(result))
    for target in result.targets:
        tokens = target.tokens
        overhead = "unknown" if tokens.overhead is None else f"{tokens.overhead} tokens"
        console.print(
            f"[dim]{target.label}: {target.api.value} at {target.url}, prompts of {tokens.pool.kind} "
            f"({tokens.pool.source}); server's own prompt overhead: {overhead}[/]"
        )
    console.print(f"[dim]device: {result.device.describe()} ({result.device.source})[/]")
    if result.price is not None:
        console.print(f"[dim]price: {result.price.usd_per_hour:g} USD/hour ({result.price.source})[/]")
    if result.interrupted:
        console.print("[yellow]Interrupted: only the runs that finished are reported.[/]")
    for line in unanswered(result):
        console.print(f"[red]error:[/] {escape(line)}")
    for path in result.files:
        console.print(f"[green]wrote[/] {path}")
