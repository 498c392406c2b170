"""A/B comparison: per load level, each key metric's median and range over the interleaved repeats of each
server, and the ratio B/A. Machines are noisy; only ratios measured in the same interleaved session mean much."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pier.bench.metrics import MS, Metrics
from pier.bench.options import Level
from pier.bench.result import LevelComparison, MetricComparison, RunResult, Spread, TargetInfo


@dataclass(frozen=True)
class KeyMetric:
    name: str
    label: str
    higher_is_better: bool
    value: Callable[[Metrics], float]


KEY_METRICS: tuple[KeyMetric, ...] = (
    KeyMetric("output_throughput", "output tok/s", True, lambda m: m.output_throughput),
    KeyMetric("request_throughput", "requests/s", True, lambda m: m.request_throughput),
    KeyMetric("p50_ttft_ms", "TTFT p50 (ms)", False, lambda m: m.ttft.median * MS),
    KeyMetric("p99_ttft_ms", "TTFT p99 (ms)", False, lambda m: m.ttft.percentiles[99] * MS),
    KeyMetric("p50_tpot_ms", "TPOT p50 (ms)", False, lambda m: m.tpot.median * MS),
    KeyMetric("p99_tpot_ms", "TPOT p99 (ms)", False, lambda m: m.tpot.percentiles[99] * MS),
    KeyMetric("p50_itl_ms", "ITL p50 (ms)", False, lambda m: m.itl.median * MS),
    KeyMetric("p99_itl_ms", "ITL p99 (ms)", False, lambda m: m.itl.percentiles[99] * MS),
    KeyMetric("p50_e2el_ms", "E2E p50 (ms)", False, lambda m: m.e2el.median * MS),
    KeyMetric("success_rate", "success rate", True, lambda m: m.success_rate),
)


def spread(values: Sequence[float]) -> Spread:
    return Spread(statistics.median(values), min(values), max(values))


def ratio_of_medians(a: Sequence[float], b: Sequence[float]) -> float | None:
    """a's median over b's, each over its repeats; None when b's median is 0."""
    below = statistics.median(b)
    return statistics.median(a) / below if below else None


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """a[i] / b[i] for each repeat i. The two runs of a pair were measured side by side, under the same noise, so
    these ratios swing less than the values do; a pair whose b is 0 is left out."""
    return [x / y for x, y in zip(a, b, strict=True) if y]


def compare(runs: Sequence[RunResult], a: TargetInfo, b: TargetInfo, levels: Sequence[Level]) -> list[LevelComparison]:
    return [LevelComparison(level, _metrics(runs, a, b, level)) for level in levels if _has(runs, a, b, level)]


def _metrics(runs: Sequence[RunResult], a: TargetInfo, b: TargetInfo, level: Level) -> list[MetricComparison]:
    def values(target: TargetInfo, key: KeyMetric) -> Spread:
        return spread([key.value(r.metrics) for r in runs if r.target.label == target.label and r.level == level])

    return [MetricComparison(k.name, k.label, k.higher_is_better, values(a, k), values(b, k)) for k in KEY_METRICS]


def _has(runs: Sequence[RunResult], a: TargetInfo, b: TargetInfo, level: Level) -> bool:
    present = {r.target.label for r in runs if r.level == level}
    return {a.label, b.label} <= present
