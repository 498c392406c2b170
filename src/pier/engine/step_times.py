"""How long the engine's steps take, by what they carried: what a stream's gaps between tokens are made of.

A running stream gets one token per step, so its gaps are the steps' times (plus a delivery to its event loop).
The scheduling policy bounds them by kind (engine/scheduler.py): a *decode* step (running streams only) is the
floor; a *mixed* step (streams and prompt tokens) costs at most `ITL_BOUND` times a decode step while the engine
has slots to spare; a *prompt* step (prompt tokens, no stream waiting on it) holds no stream back. Each step is
timed twice: its forward pass (the llama_decode calls) and the whole step on the engine thread (admission,
scheduling, the forward pass, sampling, copies of prefixes to and from host memory). A client's ITL p99 above
the mixed steps' forward p99 comes from the rest of the step or from outside the engine (the event loop, the
network); the metrics say which (`pier_engine_forward_seconds`, `pier_engine_step_seconds`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import StrEnum

# From a small model's decode step on 2 cores (~1 ms) to a long prompt's step on a big one.
STEP_BUCKETS = (0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05,
                0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)


class StepKind(StrEnum):
    DECODE = "decode"  # running streams only
    MIXED = "mixed"  # running streams and prompt tokens: the steps the policy bounds
    PROMPT = "prompt"  # prompt tokens only


def step_kind(decode_rows: int, prompt_tokens: int) -> StepKind:
    if not prompt_tokens:
        return StepKind.DECODE
    return StepKind.MIXED if decode_rows else StepKind.PROMPT


@dataclass(frozen=True)
class TimeHistogram:
    """Counts per bucket of `STEP_BUCKETS` (not cumulative; the last one is above every bound) and their sum."""

    counts: tuple[int, ...]
    total_s: float

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass
class _Recorder:
    counts: list[int] = field(default_factory=lambda: [0] * (len(STEP_BUCKETS) + 1))
    total_s: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(STEP_BUCKETS, seconds)] += 1
        self.total_s += seconds

    def snapshot(self) -> TimeHistogram:
        return TimeHistogram(tuple(self.counts), self.total_s)


@dataclass(frozen=True)
class StepTimesSnapshot:
    """Per step kind, the forward passes' and the whole steps' times so far."""

    forward: dict[StepKind, TimeHistogram]
    step: dict[StepKind, TimeHistogram]


class StepTimes:
    """Filled on the engine thread, one call per step; `snapshot` is read from any thread."""

    def __init__(self) -> None:
        self._forward = {kind: _Recorder() for kind in StepKind}
        self._step = {kind: _Recorder() for kind in StepKind}

    def record(self, decode_rows: int, prompt_tokens: int, forward_s: float, step_s: float) -> None:
        kind = step_kind(decode_rows, prompt_tokens)
        self._forward[kind].observe(forward_s)
        self._step[kind].observe(step_s)

    def snapshot(self) -> StepTimesSnapshot:
        return StepTimesSnapshot({k: r.snapshot() for k, r in self._forward.items()},
                                 {k: r.snapshot() for k, r in self._step.items()})
