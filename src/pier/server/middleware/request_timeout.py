"""A per-request time limit the gateway may set (`X-Pier-Timeout-Seconds`) in place of the copy's
SAGEMAKER_MODEL_SERVER_TIMEOUT: asynchronous inference runs a request for up to its InvocationTimeoutSeconds (15
minutes by default, as on AWS), far past the 60 s a real-time client waits. Only the gateway reaches a copy, so the
header is the gateway's word; an unreadable or non-positive value is ignored (the copy's own limit applies)."""

from __future__ import annotations

from contextvars import ContextVar

from starlette.types import ASGIApp, Receive, Scope, Send

from pier.channel.headers import TIMEOUT_HEADER

HEADER = TIMEOUT_HEADER
_HEADER_KEY = HEADER.lower().encode()
_current: ContextVar[float | None] = ContextVar("pier_request_timeout", default=None)


def deadline_s(default: float) -> float:
    """The limit of the request this code runs for: the gateway's when it set one, else `default`."""
    chosen = _current.get()
    return default if chosen is None else chosen


def parse(value: bytes) -> float | None:
    try:
        seconds = float(value.decode("latin-1"))
    except ValueError:
        return None
    return seconds if seconds > 0 else None


class RequestTimeout:
    """ASGI middleware: the header's limit for the rest of the request's context."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = next((parse(value) for name, value in scope.get("headers", []) if name == _HEADER_KEY), None)
        token = _current.set(found)  # each request its own: never the limit of one before it
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)
