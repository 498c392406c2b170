"""Stopping `pier up` without cutting anyone off.

SIGTERM or Ctrl-C starts a drain: the gateway keeps listening, but answers new work with 503 in each route's
own shape (SageMaker's ServiceUnavailable, OpenAI's error body, the control plane's AWS JSON) and `/ping` with
503, while the requests in flight go on. When they are all done, or when the grace period is over
(`--grace-period`, `PIER_GRACE_PERIOD_S`, default 30 s), what is still running is ended in its own protocol
(`Forwarder.stop()`: an SSE error event then `[DONE]`, a ModelStreamError frame, a JSON error), never by a cut
connection. Then the gateway exits, and its lifespan stops the copies, which have nothing left to do. A second
signal stops waiting.
"""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from types import FrameType

import uvicorn
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from pier.dialect import Dialect, dialect_of
from pier.env import GATEWAY, Env, number
from pier.error_bodies import render
from pier.runtime.errors import ServiceUnavailable, openai_error, sagemaker_error

log = logging.getLogger("pier.gateway")

DEFAULT_GRACE_S = 30.0
GRACE_ENV = "PIER_GRACE_PERIOD_S"
FLUSH_S = 5.0  # after the grace period, how long requests ended in protocol get to write their last words


def grace_period(given: float | None = None, env: Mapping[str, str] | None = None) -> float:
    """The grace period: `given`, else PIER_GRACE_PERIOD_S, else 30 s."""
    if given is not None:
        return given
    return Env(env, GATEWAY).get(GRACE_ENV, cast=number(low=0), default=DEFAULT_GRACE_S)


class Drain:
    """What the gateway knows about stopping: whether it is draining, and the requests still in flight."""

    def __init__(self, stop_requests: Callable[[], None]) -> None:
        self.stop_requests = stop_requests  # ends every request waiting on a copy, in its protocol
        self.draining = False
        self.in_flight = 0

    def refusal(self, scope: Scope) -> Response:
        """New work while draining: 503 in the dialect of the path it came to."""
        dialect = dialect_of(scope["path"])
        request_id = str(uuid.uuid4())
        error = ServiceUnavailable(
            "The gateway is shutting down and takes no new requests; retry shortly (on another gateway, or on "
            "this one once it is back)."
        )
        if dialect is Dialect.RUNTIME:
            return sagemaker_error(error, request_id)
        if dialect is Dialect.OPENAI:
            return openai_error(error, request_id)
        if dialect is Dialect.CONTROL:
            return render(error, Dialect.CONTROL, request_id).response()
        return render(error, Dialect.PIER).response()


class Draining:
    """ASGI middleware: counts requests in flight; while draining, refuses new work and fails /ping."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == "/ping":
            if self.drain.draining:
                await PlainTextResponse("draining", 503)(scope, receive, send)
            else:
                await self.app(scope, receive, send)
            return
        if self.drain.draining and scope["method"] != "GET":
            await self.drain.refusal(scope)(scope, receive, send)
            return
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1


class DrainingServer(uvicorn.Server):
    """uvicorn, but the first SIGTERM or SIGINT drains (see the module) instead of closing the listener."""

    def __init__(self, config: uvicorn.Config, drain: Drain, grace_s: float) -> None:
        super().__init__(config)
        self.drain = drain
        self.grace_s = grace_s
        self._grace_over: float | None = None
        self._stopped_at: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain.draining:  # a second signal: stop waiting
            log.warning("signal %d again: exiting without waiting for %d request(s)", sig, self.drain.in_flight)
            self.should_exit = True
            self.force_exit = sig == signal.SIGINT
            return
        log.info("signal %d: draining %d request(s) for up to %.0f s, then stopping the copies", sig,
                 self.drain.in_flight, self.grace_s)
        self.drain.draining = True
        self._grace_over = time.monotonic() + self.grace_s

    async def on_tick(self, counter: int) -> bool:
        if self._grace_over is not None:
            now = time.monotonic()
            if self.drain.in_flight == 0:
                return True
            if self._stopped_at is None and now >= self._grace_over:
                log.warning("the grace period is over: ending %d request(s) still in flight", self.drain.in_flight)
                self.drain.stop_requests()
                self._stopped_at = now
            if self._stopped_at is not None and now >= self._stopped_at + FLUSH_S:
                log.warning("%d request(s) did not end in time; closing their connections", self.drain.in_flight)
                return True
        return await super().on_tick(counter)
