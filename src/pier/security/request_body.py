"""A request body read before the app sees it (a SigV4 signature covers it), then handed to the app unchanged.
Later receive() calls go to the server as before, so the app still learns when the client hangs up."""

from __future__ import annotations

from starlette.types import Message, Receive

from pier.errors import ClientGone
from pier.security.errors import BodyTooLarge


class RequestBody:
    def __init__(self, receive: Receive, limit: int, declared: int = 0) -> None:
        self._receive = receive
        self.limit = limit
        self.declared = declared  # the Content-Length the client announced (0 when none)
        self.data: bytes | None = None  # None until read

    async def read(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.declared > self.limit:  # refused now, not after waiting for bytes that may never come
            raise BodyTooLarge(f"The request body is over {self.limit} bytes, the most a request may carry.")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise BodyTooLarge(f"The request body is over {self.limit} bytes, the most a request may carry.")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        self.data = b"".join(chunks)
        return self.data

    def replay(self) -> Receive:
        """The receive callable for the app: the body read here, then the server's own."""
        if self.data is None:
            return self._receive
        pending = [self.data]

        async def receive() -> Message:
            if pending:
                return {"type": "http.request", "body": pending.pop(), "more_body": False}
            return await self._receive()

        return receive
