"""A streaming response that always releases what its stream holds (the copy's connection, the copy chooser's
lease, the admission turn), however it ends: finished, failed, the client gone, or never started."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class ClosingStream(StreamingResponse):
    def __init__(self, content: AsyncGenerator[bytes, None], on_close: Callable[[], Awaitable[object]], *,
                 headers: Mapping[str, str], media_type: str) -> None:
        super().__init__(content, headers=headers, media_type=media_type)
        self._content = content
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self._content.aclose()
            finally:
                await self._on_close()
