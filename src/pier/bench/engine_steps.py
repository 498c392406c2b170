"""What a pier engine's steps took during a run, read from Prometheus text before and after it
(`pier_engine_step_seconds` and `pier_engine_forward_seconds`, by step kind): the server's side of a stream's gaps,
beside the client's ITL. A mixed step (streams and prompt tokens) against a decode step (streams alone) is the
scheduling policy's bound (docs/architecture.md); a client ITL p99 above the engine's steps comes from outside
the engine (the event loop, the network, the client).

A pier model server exposes them on its own `/metrics`; a gateway on its `/metrics`, one series per copy
(labels `copy` and `component`), summed here over the copies of the endpoint under test. Other servers have none,
and a run against them simply carries no engine figures. A step is timed just after its tokens go out, so the last
step before a scrape may be counted in the next run's figures instead: a step or two of difference, never more.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

KINDS = ("decode", "mixed", "prompt")
STEP, FORWARD = "pier_engine_step_seconds", "pier_engine_forward_seconds"

Buckets = dict[float, float]  # upper bound (math.inf last) -> cumulative count
Histograms = dict[tuple[str, str], Buckets]  # (metric, kind) -> buckets


def histograms(text: str, components: Collection[str] | None = None) -> Histograms:
    """The step histograms in Prometheus text, bucket counts summed over every series (one per copy on a
    gateway), or over the series whose `component` label is in `components`. Empty when there are none."""
    found: Histograms = {}
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError:  # not Prometheus text: no figures
        return found
    for family in families:
        if family.name not in (STEP, FORWARD):
            continue
        for sample in family.samples:
            if not sample.name.endswith("_bucket") or "kind" not in sample.labels:
                continue
            if components is not None and sample.labels.get("component") not in components:
                continue
            buckets = found.setdefault((family.name, sample.labels["kind"]), {})
            bound = float(sample.labels["le"])
            buckets[bound] = buckets.get(bound, 0.0) + sample.value
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
    """Per step kind, the steps' count, p50 and p99 over one run (the difference of two scrapes): whole steps
    (`step`) and their forward passes alone (`forward`)."""

    step: dict[str, KindFigures]
    forward: dict[str, KindFigures]

    @classmethod
    def between(cls, before: Histograms, after: Histograms) -> EngineSteps:
        def figures(metric: str) -> dict[str, KindFigures]:
            out = {}
            for kind in KINDS:
                late, early = after.get((metric, kind), {}), before.get((metric, kind), {})
                delta = {bound: count - early.get(bound, 0.0) for bound, count in late.items()}
                steps = int(delta.get(math.inf, 0.0))
                out[kind] = KindFigures(steps, quantile(delta, 0.5), quantile(delta, 0.99))
            return out

        return cls(figures(STEP), figures(FORWARD))

    @property
    def steps(self) -> int:
        return sum(f.steps for f in self.step.values())

    def cell(self, kind: str, scale: float = 1000.0) -> str:
        """'p50 / p99 (steps)' of the whole steps of `kind`, in ms."""
        f = self.step[kind]
        if not f.steps or f.p50_s is None or f.p99_s is None:
            return "–"
        return f"{f.p50_s * scale:.1f} / {f.p99_s * scale:.1f} ({f.steps})"

    def mixed_over_decode(self) -> float | None:
        """A mixed step's p50 over a decode step's: what a prompt beside the streams costs each of their gaps."""
        mixed, decode = self.step["mixed"].p50_s, self.step["decode"].p50_s
        return mixed / decode if mixed is not None and decode else None
