"""What a benchmark produced: every run's requests and numbers, the A/B comparisons, and the files written."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pier.bench.calibration import PromptTokens
from pier.bench.copies import CopySample
from pier.bench.engine_steps import EngineSteps
from pier.bench.metrics import Metrics, Slo
from pier.bench.options import Api, BenchOptions, Level
from pier.bench.pricing import Price
from pier.bench.request_record import RequestRecord
from pier.gpus import GpuInventory


@dataclass(frozen=True)
class TargetInfo:
    label: str
    url: str
    api: Api
    model: str | None
    tokens: PromptTokens
    warmup_errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    """One load level against one target, once."""

    target: TargetInfo
    level: Level
    repeat: int
    started_at: float  # wall-clock epoch seconds, for the reader
    started: float  # time.perf_counter() at the start, the origin of `start_s` in the per-request results
    records: list[RequestRecord]
    metrics: Metrics
    copies: list[CopySample] = field(default_factory=list)  # a rate schedule on a pier gateway: copies over time
    engine: EngineSteps | None = None  # a pier server's engine step times over the run (bench/engine_steps.py)


@dataclass(frozen=True)
class Spread:
    """A metric over the repeats of a run: the median and the range."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class MetricComparison:
    name: str
    label: str
    higher_is_better: bool
    a: Spread
    b: Spread

    @property
    def ratio(self) -> float | None:
        """B over A, from the medians."""
        return self.b.median / self.a.median if self.a.median else None


@dataclass(frozen=True)
class LevelComparison:
    level: Level
    metrics: list[MetricComparison]


@dataclass
class BenchResult:
    options: BenchOptions
    targets: list[TargetInfo]
    runs: list[RunResult]
    comparisons: list[LevelComparison]
    price: Price | None
    interrupted: bool = False  # stopped by Ctrl-C: only the runs that finished are here
    files: list[Path] = field(default_factory=list)
    # The GPUs of the host the benchmark ran on (pier.gpus; none: it ran where only CPUs compute), so figures are
    # never compared across devices unawares. The targets' device when they run on this host, as they usually do.
    device: GpuInventory = field(default_factory=GpuInventory)
    # The CPU this ran on and its llama.cpp build (pier.engine.kernels.host_line), and each target's copies' kernels
    # where the target is a pier gateway (its /pier/copies), by target label.
    cpu: str = ""
    kernels: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)

    @property
    def slo(self) -> Slo:
        o = self.options
        return Slo.from_ms(o.slo_ttft_ms, o.slo_tpot_ms, o.slo_e2el_ms)

    @property
    def ok(self) -> bool:
        """At least one request of every run was answered."""
        return bool(self.runs) and all(run.metrics.completed for run in self.runs)
