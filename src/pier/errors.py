"""One error hierarchy for pier. Each API flavor maps these to its own wire shape in one place."""

from __future__ import annotations

# A model server's answer carries this header (value: the error code) when it refused the request before doing
# any of its work (loading, shutting down, full), so the gateway may send it to another copy instead.
REFUSED_HEADER = "X-Pier-Refused"


class PierError(Exception):
    """Base of every error pier raises on purpose. `message` is written for the user: it says how to fix it."""

    code = "internal_error"

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidRequest(PierError):
    """The request itself is wrong (a value out of range, a missing field); retrying it unchanged fails again."""

    code = "invalid_request"


class ContextLengthExceeded(InvalidRequest):
    """Prompt plus requested output does not fit in the context window."""

    code = "context_length_exceeded"

    def __init__(self, message: str, *, prompt_tokens: int, max_tokens: int, limit: int) -> None:
        super().__init__(message, param="messages")
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.limit = limit


class Overloaded(PierError):
    """Too much work in flight right now; retrying later succeeds."""

    code = "overloaded"


class EngineStopped(PierError):
    """The engine is shutting down or has died and accepts no new work."""

    code = "engine_stopped"


class GenerationFailed(PierError):
    """Generation started but could not complete (the model failed, or a deadline passed)."""

    code = "generation_failed"
