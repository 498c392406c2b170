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
SCHEDULE = "schedule.png"
SCHEDULE_SIZE = (12.0, 9.0)
BIN_S = 5.0  # the schedule plot's throughput and latency are per bin of this many seconds
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
        runs = [r for r in result.runs if r.level.mode == mode or (mode is None and r.level.mode != "schedule")]
        if runs:
            figure = draw(runs, result)
            figure.savefig(out / name, dpi=DPI)
            written.append(out / name)
    for index, run in enumerate(r for r in result.runs if r.level.mode == "schedule"):
        name = SCHEDULE if index == 0 else SCHEDULE.replace(".png", f"-{index + 1}.png")
        _schedule(run, result).savefig(out / name, dpi=DPI)
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


def _schedule(run: RunResult, result: BenchResult) -> Figure:
    """A rate schedule over time: offered and completed requests/s, latency, and (on a pier gateway) copies."""
    figure = Figure(figsize=SCHEDULE_SIZE, layout="constrained")
    rates, latency, copies = figure.subplots(3, 1, sharex=True)
    edges, offered = [0.0], []
    for rate, seconds in run.level.schedule:
        edges.append(edges[-1] + seconds)
        offered.append(rate)
    rates.stairs(offered, edges, color="grey", linestyle=":", label="offered (Poisson mean)")
    ends = [(r.start - run.started + r.end, r) for r in run.records if r.end is not None]
    bins = [i * BIN_S for i in range(int(max([edges[-1], *(t for t, _ in ends)]) // BIN_S) + 2)]
    done = [[r for t, r in ends if low <= t < low + BIN_S] for low in bins[:-1]]
    rates.stairs([sum(r.ok for r in group) / BIN_S for group in done], bins, color="C0", label="completed")
    failed = [sum(not r.ok for r in group) / BIN_S for group in done]
    if any(failed):
        rates.stairs(failed, bins, color="C3", label="failed")
    rates.set(ylabel="requests/s", title=f"{run.target.label}: {run.level.label}")
    for percentile, style in ((50, "-"), (99, "--")):
        values = [_quantile([r.end for r in group if r.ok and r.end is not None], percentile) for group in done]
        latency.stairs(values, bins, color="C1", linestyle=style, label=f"end-to-end p{percentile}")
    latency.set(ylabel="latency, s (by completion)")
    components = sorted({name for sample in run.copies for name in sample.ready})
    times = [sample.at_s for sample in run.copies]
    for color, name in enumerate(components):
        copies.step(times, [sample.ready.get(name, 0) for sample in run.copies], where="post", color=f"C{color + 2}",
                    label=name)
    if not components:
        copies.text(0.5, 0.5, "copy counts are shown for a pier gateway only", ha="center",
                    transform=copies.transAxes)
    copies.set(xlabel="seconds since the start", ylabel="ready copies")
    for ax in (rates, latency, copies):
        ax.set_ylim(bottom=0)
        ax.grid(alpha=GRID_ALPHA)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right")
    figure.suptitle(f"Load over time — {_workload(result)}")
    return figure


def _quantile(values: list[float], percentile: int) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * percentile / 100))]
