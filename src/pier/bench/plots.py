"""PNG plots of a benchmark: throughput against load, and latency against throughput, one line per server.

Figures are drawn with matplotlib's object API on the Agg canvas: no pyplot, no global state, no display.
Each point is a load level's median over its repeats; the repeats themselves are the faint dots.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from pier.bench.metrics import MS, Metrics
from pier.bench.result import BenchResult, RunResult

THROUGHPUT_VS_CONCURRENCY = "throughput_vs_concurrency.png"
THROUGHPUT_VS_RATE = "throughput_vs_rate.png"
LATENCY_VS_THROUGHPUT = "latency_vs_throughput.png"
FIGURE_SIZE = (12.0, 4.8)
DPI = 110
LOG_AXIS_SPAN = 4  # levels spanning this factor or more (1, 2, 4, 8, ...) read better on a log2 axis
REPEAT_ALPHA = 0.35
GRID_ALPHA = 0.3
LABEL_OFFSET_POINTS = (4, 4)  # a level's label sits just above and right of its point

MODE_NAMES = {"concurrency": "", "rate": " (Poisson)"}
MODE_MARKERS = {"concurrency": "o", "rate": "s"}

Value = Callable[[Metrics], float]


def write_plots(result: BenchResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, mode, draw in (
        (THROUGHPUT_VS_CONCURRENCY, "concurrency", _throughput_vs_load),
        (THROUGHPUT_VS_RATE, "rate", _throughput_vs_load),
        (LATENCY_VS_THROUGHPUT, None, _latency_vs_throughput),
    ):
        runs = [r for r in result.runs if mode is None or r.level.mode == mode]
        if runs:
            figure = draw(runs, result)
            figure.savefig(out / name, dpi=DPI)
            written.append(out / name)
    return written


def _throughput_vs_load(runs: Sequence[RunResult], result: BenchResult) -> Figure:
    closed = runs[0].level.mode == "concurrency"
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    tokens, requests = figure.subplots(1, 2)
    xlabel = "concurrent users (closed loop)" if closed else "offered request rate, req/s (Poisson)"
    for ax, value, ylabel in (
        (tokens, lambda m: m.output_throughput, "output tokens/s"),
        (requests, lambda m: m.request_throughput, "completed requests/s"),
    ):
        for color, (label, group) in enumerate(_by_target(runs).items()):
            _line(ax, group, lambda r: r.level.value, value, label, color=f"C{color}")
        ax.set(xlabel=xlabel, ylabel=ylabel)
        ax.set_ylim(bottom=0)
        _level_axis(ax, sorted({r.level.value for r in runs}))
        ax.grid(alpha=GRID_ALPHA)
        ax.legend(title="server")
    if not closed:
        top = max(r.level.value for r in runs)
        requests.plot([0, top], [0, top], color="grey", linestyle=":", label="offered")
        requests.legend(title="server")
    figure.suptitle(f"Throughput vs {'concurrency' if closed else 'request rate'} — {_workload(result)}")
    return figure


def _latency_vs_throughput(runs: Sequence[RunResult], result: BenchResult) -> Figure:
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    first, per_token = figure.subplots(1, 2)
    for ax, name, metric in ((first, "time to first token", "ttft"), (per_token, "time per output token", "tpot")):
        for color, (label, by_target) in enumerate(_by_target(runs).items()):
            for mode, group in _by_mode(by_target).items():
                for percentile, style in ((50, "-"), (99, "--")):
                    series = f"{label} p{percentile}{MODE_NAMES[mode]}"
                    y = _percentile_ms(metric, percentile)
                    marker = MODE_MARKERS[mode]
                    _line(ax, group, _output_throughput, y, series, color=f"C{color}", style=style, marker=marker)
                _annotate_levels(ax, group, _percentile_ms(metric, 50))
        ax.set(xlabel="output tokens/s", ylabel=f"{name}, ms", title=f"{name.capitalize()} (p50 solid, p99 dashed)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=GRID_ALPHA)
        ax.legend(title="server")
    figure.suptitle(f"Latency vs throughput — {_workload(result)}")
    return figure


def _line(
    ax: Axes,
    runs: Sequence[RunResult],
    x: Callable[[RunResult], float],
    y: Value,
    label: str,
    *,
    color: str,
    style: str = "-",
    marker: str = "o",
) -> None:
    levels = sorted({r.level.value for r in runs})
    at = {level: [r for r in runs if r.level.value == level] for level in levels}
    xs = [statistics.median(x(r) for r in at[level]) for level in levels]
    ys = [statistics.median(y(r.metrics) for r in at[level]) for level in levels]
    ax.plot(xs, ys, style, marker=marker, color=color, label=label)
    if any(len(group) > 1 for group in at.values()):
        ax.scatter([x(r) for r in runs], [y(r.metrics) for r in runs], color=color, alpha=REPEAT_ALPHA)


def _annotate_levels(ax: Axes, runs: Sequence[RunResult], y: Value) -> None:
    for level in sorted({r.level.value for r in runs}):
        at = [r for r in runs if r.level.value == level]
        x = statistics.median(r.metrics.output_throughput for r in at)
        point = (x, statistics.median(y(r.metrics) for r in at))
        ax.annotate(at[0].level.label, point, textcoords="offset points", xytext=LABEL_OFFSET_POINTS, fontsize="small")


def _output_throughput(run: RunResult) -> float:
    return run.metrics.output_throughput


def _level_axis(ax: Axes, levels: list[float]) -> None:
    if levels[0] > 0 and levels[-1] / levels[0] >= LOG_AXIS_SPAN:
        ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [f"{level:g}" for level in levels])


def _percentile_ms(metric: str, percentile: int) -> Value:
    def value(m: Metrics) -> float:
        return float(getattr(m, metric).percentiles[percentile] * MS)

    return value


def _by_mode(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """Closed- and open-loop levels are different axes of load: never one line through both."""
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(run.level.mode, []).append(run)
    return groups


def _by_target(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(run.target.label, []).append(run)
    return groups


def _workload(result: BenchResult) -> str:
    o = result.options
    prefix = f", {o.shared_prefix}-token shared prefix" if o.shared_prefix else ""
    return f"{o.workload.value} workload, {o.input_len} input / {o.output_len} output tokens{prefix}"
