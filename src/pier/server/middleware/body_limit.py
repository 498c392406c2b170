"""SageMaker's payload limit: a request body over 6 MiB is answered 413 before it is parsed."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.server.errors import http_error, request_dialect

MAX_BODY_BYTES = 6 * 1024 * 1024  # 6,291,456: what SageMaker's InvokeEndpoint accepts


def too_large(size: int | str, limit: int) -> str:
    return (
        f"The request body is {size} bytes; the limit is {limit} bytes (6 MiB, SageMaker's payload limit). "
        "Send a shorter prompt, or split the work over several requests."
    )


class BodyLimit:
    """Refuses by Content-Length at once; a chunked body is counted as it arrives and refused once over."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            response = http_error(413, too_large(int(declared), self.limit), request_dialect(scope))
            await response(scope, receive, send)
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Raised inside the route's body read, so the app's handlers answer in the route's shape.
                    raise HTTPException(413, too_large(f"more than {self.limit}", self.limit))
            return message

        await self.app(scope, counted_receive, send)
