"""What `pier tune` optimizes: output tokens per second per instance, counted only from runs that meet the SLO.

An SLO reads `ttft_p90<2s,tpot_p90<150ms`: a metric (ttft, tpot, itl, e2el), a percentile of it over a run's
requests, and a bound in s or ms. A run meets it when every named percentile is under its bound and no
request failed. Goodput is the run's output tokens/s when it meets the SLO, else 0: a setup that misses its
latency promise serves nothing the user can sell, however fast it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pier.bench.metrics import PERCENTILES, Distribution, Metrics

METRICS = ("ttft", "tpot", "itl", "e2el")
_TERM = re.compile(r"^(?P<metric>[a-z][a-z0-9]*)_p(?P<pct>\d+)\s*<\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>ms|s)$")


class SloError(ValueError):
    """An SLO that does not parse; the message shows the form it takes."""


@dataclass(frozen=True)
class Bound:
    metric: str
    percentile: int
    limit_s: float

    def __str__(self) -> str:
        return f"{self.metric}_p{self.percentile}<{self.limit_s * 1000:g}ms"

    def value(self, metrics: Metrics) -> float:
        distribution: Distribution = getattr(metrics, self.metric)
        return distribution.percentiles[self.percentile]


def parse_slo(text: str) -> tuple[Bound, ...]:
    """`ttft_p90<2s,tpot_p90<150ms` -> its bounds; an empty text is no SLO."""
    bounds = []
    for term in filter(None, (t.strip() for t in text.split(","))):
        match = _TERM.match(term.lower())
        if not match:
            raise SloError(f"cannot read {term!r} of --slo: write METRIC_pPCT<VALUE(s|ms), e.g. "
                           "ttft_p90<2s,tpot_p90<150ms")
        metric, pct = match["metric"], int(match["pct"])
        if metric not in METRICS:
            raise SloError(f"--slo names {metric!r}: use one of {', '.join(METRICS)}")
        if pct not in PERCENTILES:
            raise SloError(f"--slo asks for p{pct} of {metric}: use one of "
                           f"{', '.join(f'p{p}' for p in PERCENTILES)}")
        scale = 1.0 if match["unit"] == "s" else 0.001
        bounds.append(Bound(metric, pct, float(match["value"]) * scale))
    return tuple(bounds)


def misses(bounds: Sequence[Bound], metrics: Metrics) -> list[str]:
    """What a run missed, in words (empty: it met the SLO)."""
    found = [f"{b.metric} p{b.percentile} {b.value(metrics) * 1000:.0f} ms ≥ {b.limit_s * 1000:g} ms"
             for b in bounds if b.value(metrics) >= b.limit_s]
    if metrics.failed or not metrics.completed:
        codes = ", ".join(f"{code} x{n}" for code, n in sorted(metrics.errors_by_code.items()))
        found.append(f"{metrics.failed} of {metrics.started} requests failed" + (f" ({codes})" if codes else ""))
    return found


def goodput(bounds: Sequence[Bound], metrics: Metrics) -> float:
    """Output tokens/s of a run that met the SLO; 0 for one that did not."""
    return 0.0 if misses(bounds, metrics) else metrics.output_throughput
