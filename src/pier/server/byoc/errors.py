"""The one error of bring-your-own-code mode: it carries the HTTP status to answer, on both sides of the
pipe (the server's worker pool and the worker process running the user's code)."""

from __future__ import annotations

from pier.errors import PierError, Wire


class HandlerError(PierError):
    """The handler could not be started, could not answer, or raised; `status` is the HTTP status to send
    (the toolkit's own errors carry theirs, a bad body is 4xx, the rest 500)."""

    code = "handler_error"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.wire = Wire.of_status(status)
