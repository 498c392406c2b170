"""Server-sent events: the framing both OpenAI and TGI stream with, and a response that always cleans up."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from pier.server.copy_admission import Ticket


def event(data: Any, *, tgi: bool = False) -> bytes:
    """One `data:` event. TGI writes no space after the colon (axum's SSE); OpenAI servers write one."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data:{payload}\n\n".encode() if tgi else f"data: {payload}\n\n".encode()


class EventStream(StreamingResponse):
    """An SSE response that closes its event generator (which aborts the generation) and releases its
    concurrency ticket however the stream ends: finished, failed, or the client gone."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[bytes, None], ticket: Ticket) -> None:
        super().__init__(events, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._events = events
        self._ticket = ticket

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._events.aclose()
            self._ticket.release()
