"""When a request still running is ended with an error, for a client that waits a given time for its answer.

Shared by the model server (SAGEMAKER_MODEL_SERVER_TIMEOUT) and the gateway's SageMaker routes
(PIER_INVOCATION_TIMEOUT_SECONDS); imports nothing of pier. A whole answer must arrive within the deadline; a
stream's deadline (`StreamClock`) bounds the wait for its first part and each silence between parts instead, so a
stream that keeps flowing is not cut, with a separate total bound an operator may set (PIER_STREAM_TIMEOUT_SECONDS).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MARGIN_S = 2.0  # at most this much before the client's timeout
MARGIN_SHARE = 0.1  # and at most this share of it, for short timeouts


def before_client_gives_up(timeout_s: float) -> float:
    """A little before `timeout_s`, so the error reaches a client whose own timeout is that number (boto3's 60 s)
    before it gives up and reports a timeout instead."""
    return timeout_s - min(MARGIN_S, timeout_s * MARGIN_SHARE)


class Limit(StrEnum):
    """Which of a stream's bounds ended it."""

    FIRST_PART = "first part"  # nothing arrived within the deadline of the request's arrival
    SILENCE = "silence"  # nothing arrived within the deadline of the last part
    TOTAL = "total"  # the whole stream ran past the operator's total bound


@dataclass
class StreamClock:
    """A stream's deadline, which moves while it flows: its first part within `idle_s` of `start`, each next part
    within `idle_s` of the one before, and the whole within `total_s` of `start` (None: no total bound). A stream
    that keeps sending is never cut by `idle_s`; one that falls silent is. Times are one clock's (the loop's)."""

    start: float
    idle_s: float
    total_s: float | None = None
    last: float | None = None  # when the latest part arrived

    def moved(self, now: float) -> None:
        """A part arrived at `now`."""
        self.last = now

    def due(self) -> float:
        """When the stream is out of time unless another part arrives first."""
        return min(self._idle_due(), self._total_due())

    def limit(self) -> Limit:
        """The bound `due()` is: the one a stream ended at `due()` ran into."""
        if self._total_due() <= self._idle_due():
            return Limit.TOTAL
        return Limit.FIRST_PART if self.last is None else Limit.SILENCE

    def _idle_due(self) -> float:
        return (self.start if self.last is None else self.last) + self.idle_s

    def _total_due(self) -> float:
        return float("inf") if self.total_s is None else self.start + self.total_s
