"""One request on its way to copies (`Call`), and how its answer can stop short (`StreamEnded`): what the
attempt loop (answer.py) takes, and how it ends a body it cannot finish."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from pier.deadline import StreamClock
from pier.runtime.errors import InvocationError
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.routing_strategy import DEFAULT_REQUEST_ROUTING, RequestRouting
from pier.runtime.target import Target


@dataclass(frozen=True)
class Call:
    """One request on its way to a copy."""

    endpoint: str
    target: Target
    path: str
    body: bytes
    headers: Mapping[str, str]
    prefix: tuple[str, ...]  # see pier.channel.prefix
    deadline: float | None  # event-loop time; None leaves it to the copy's own deadline
    deadline_s: float | None  # the same, as the number of seconds users configured
    retarget: Callable[[], Awaitable[Target]] | None = None  # the copies now, to resume on a replacement
    route: RequestRouting = DEFAULT_REQUEST_ROUTING  # its strategy, prefix key, and the copy of its session
    method: str = "POST"
    # A streaming route's moving deadline (the first part, then each silence, within `deadline_s`; and the
    # operator's total bound): a stream that keeps flowing is not cut at `deadline`.
    stream: StreamClock | None = None
    deadline_setting: str | None = None  # what raises `deadline_s`, named when out of time (None: the endpoint's)
    avoid: frozenset[str] = frozenset()  # copies it must not go to (a retry's, away from the copy that failed it)

    def due(self) -> float | None:
        """When the wait under way is out of time (event-loop time); None: left to the copy."""
        return self.stream.due() if self.stream is not None else self.deadline


class StreamEnded(Exception):
    """The copy's answer stopped short after it had begun: out of time, the connection broke (and the request
    could not be resumed), or the gateway is shutting down. `code` is ModelStreamError's ErrorCode for the model's
    failures; None for the service's own (the gateway's drain ended it), which SageMaker's event stream reports as
    InternalStreamFailure."""

    def __init__(self, error: InvocationError, code: StreamErrorCode | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.code = code
