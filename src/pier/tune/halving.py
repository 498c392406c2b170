"""Which candidates earn another trial: successive halving that does not prune inside the noise (pure).

After each rung (one more trial of every candidate still in), the better half by median goodput goes on, and
so does any other whose best trial reached the last kept one's median: on a noisy host a candidate is cut only
when even its luckiest run is worse. Candidates that met the SLO in no trial are cut as soon as one candidate
met it; while none has, raw throughput ranks them, so the report still says which came closest.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Standing:
    """One candidate's trials so far."""

    key: str
    goodputs: tuple[float, ...]
    throughputs: tuple[float, ...]

    @property
    def goodput(self) -> float:
        return statistics.median(self.goodputs) if self.goodputs else 0.0

    @property
    def throughput(self) -> float:
        return statistics.median(self.throughputs) if self.throughputs else 0.0

    @property
    def best(self) -> float:
        return max(self.goodputs, default=0.0)

    @property
    def sort_key(self) -> tuple[float, float]:
        return (self.goodput, self.throughput)


def rank(standings: Sequence[Standing]) -> list[Standing]:
    """Best first: median goodput, then median throughput."""
    return sorted(standings, key=lambda s: s.sort_key, reverse=True)


def survivors(standings: Sequence[Standing], eta: int = 2) -> list[str]:
    """The keys that go on to the next rung, best first; at least one."""
    ranked = rank(standings)
    if not ranked:
        return []
    if any(s.goodput > 0 for s in ranked):
        ranked = [s for s in ranked if s.best > 0]
    keep = max(1, math.ceil(len(ranked) / eta))
    cut = ranked[keep - 1].goodput
    kept = ranked[:keep] + [s for s in ranked[keep:] if cut > 0 and s.best >= cut]
    return [s.key for s in kept]


def within_noise(first: Standing, second: Standing) -> bool:
    """Whether the runner-up's best trial reached the winner's worst: the order may be the host's luck."""
    return bool(first.goodputs and second.goodputs) and max(second.goodputs) >= min(first.goodputs)
