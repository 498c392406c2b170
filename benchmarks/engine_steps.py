"""A pier copy's engine step times around a benchmark run, for the scripts here (bursts.py, many_cores.py): the
figures are pier's own (`pier.bench.engine_steps`, which `pier bench` prints too); this reads them synchronously
from one copy's /metrics."""

from __future__ import annotations

import httpx

from pier.bench.engine_steps import KINDS, EngineSteps, Histograms, KindFigures, histograms, quantile

__all__ = ["KINDS", "EngineSteps", "KindFigures", "quantile", "scrape"]


def scrape(url: str) -> Histograms:
    """(metric, kind) -> its cumulative buckets, from the copy at `url`."""
    return histograms(httpx.get(url.rstrip("/") + "/metrics", timeout=10).text)
