"""What a pier copy's engine steps took during a run, read from its /metrics (`pier_engine_step_seconds` and
`pier_engine_forward_seconds`, by step kind) before and after: the engine's side of a stream's gaps, beside the
client's ITL. A mixed step (streams and prompt tokens) against a decode step (streams alone) is the scheduling
policy's bound (engine/scheduler.py); a client ITL p99 above the engine's steps comes from outside the engine."""

from __future__ import annotations

import math
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

KINDS = ("decode", "mixed", "prompt")
STEP, FORWARD = "pier_engine_step_seconds", "pier_engine_forward_seconds"

Buckets = dict[float, float]  # upper bound (math.inf last) -> cumulative count


def scrape(url: str) -> dict[tuple[str, str], Buckets]:
    """(metric, kind) -> its cumulative buckets, from the copy at `url`."""
    text = httpx.get(url.rstrip("/") + "/metrics", timeout=10).text
    found: dict[tuple[str, str], Buckets] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in (STEP, FORWARD):
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                found.setdefault((family.name, sample.labels["kind"]), {})[float(sample.labels["le"])] = sample.value
    return found


def quantile(buckets: Buckets, q: float) -> float | None:
    """The q-quantile, linear within its bucket (as Prometheus' histogram_quantile); None when empty. Above the
    highest finite bound: that bound."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound in bounds:
        if buckets[bound] >= rank:
            if math.isinf(bound):
                return lower
            inside = buckets[bound] - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = bound, buckets[bound]
    return lower


@dataclass(frozen=True)
class KindFigures:
    steps: int
    p50_s: float | None
    p99_s: float | None


@dataclass(frozen=True)
class EngineSteps:
    """Per step kind, the whole steps' count, p50 and p99 over one run (the difference of two scrapes)."""

    step: dict[str, KindFigures]
    forward: dict[str, KindFigures]

    @classmethod
    def between(cls, before: dict[tuple[str, str], Buckets], after: dict[tuple[str, str], Buckets]) -> EngineSteps:
        def figures(metric: str) -> dict[str, KindFigures]:
            out = {}
            for kind in KINDS:
                late, early = after.get((metric, kind), {}), before.get((metric, kind), {})
                delta = {bound: count - early.get(bound, 0.0) for bound, count in late.items()}
                steps = int(delta.get(math.inf, 0.0))
                out[kind] = KindFigures(steps, quantile(delta, 0.5), quantile(delta, 0.99))
            return out

        return cls(figures(STEP), figures(FORWARD))

    def cell(self, kind: str, scale: float = 1000.0) -> str:
        """'p50 / p99 (steps)' of the whole steps of `kind`, in ms."""
        f = self.step[kind]
        if not f.steps or f.p50_s is None or f.p99_s is None:
            return "–"
        return f"{f.p50_s * scale:.1f} / {f.p99_s * scale:.1f} ({f.steps})"
