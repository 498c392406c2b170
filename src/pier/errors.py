"""One error hierarchy for pier. Every error carries its wire fields (`Wire`) the same way, and each API's edge
renders them in its dialect (pier.error_bodies); nothing else maps errors to statuses.

The tree (classes outside this module are named by their package)::

    PierError                              500 · InternalFailure · server_error · tgi 500 internal
    ├── InvalidRequest                     400 · ValidationError · invalid_request_error · tgi 422 validation
    │   ├── ContextLengthExceeded          prompt + max_tokens over the context window
    │   │   └── InputTooLong               the prompt alone over MAX_INPUT_TOKENS
    │   ├── model.chat.TemplateError       the chat template could not render the messages
    │   └── runtime.InvalidInvocation      the gateway's ValidationError (PayloadTooLarge 413, EndpointNotFound 404)
    ├── ResponseNotStored                  404 · a stored OpenAI response asked for: pier keeps none
    ├── Overloaded                         429 · ThrottlingException (boto3 retries it by status and by code)
    │   └── runtime.Throttled              no copy has room, the queue is full: 429 on the SageMaker runtime too
    ├── EngineStopped                      503 · ServiceUnavailable
    │   └── server.ShuttingDown
    ├── NotReady                           503 · ModelNotReadyException (429 on SageMaker)
    ├── GenerationFailed                   500 · ModelError 424 · tgi 424 generation
    │   ├── server.DeadlineExceeded        424 timeout_error
    │   └── runtime.ModelError             the copy failed: 424 on SageMaker, 502 on OpenAI
    ├── runtime.InvocationError            what else ends an invocation at the gateway
    │   ├── runtime.InternalFailure        500
    │   └── runtime.ServiceUnavailable     503: no copy can take it
    ├── control.ControlError               400 · its AWS `__type` (ValidationException, ResourceInUse, ...)
    ├── control.fetch.ModelDataError       model data could not be fetched
    ├── security.AuthFailure               403 · its AWS code (the gateway's guard refuses: no key, bad signature, role)
    ├── server.HttpError                   its own status (the router's 404, 405; the payload limit's 413)
    ├── server.byoc.HandlerError           its own status (a bring-your-own-code handler's answer)
    └── bench.BenchError                   a benchmark that cannot run

    ClientGone                             not a PierError: the client hung up, nobody is left to answer
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

RETRY_AFTER_S = 1
RETRY_STATUSES = frozenset({429, 503})  # answers that carry Retry-After

_TGI_TYPES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


@dataclass(frozen=True)
class Wire:
    """How one error reads on each API. `status` is the HTTP status on OpenAI routes and a copy's own routes;
    TGI and SageMaker differ where their servers do."""

    status: int
    openai_type: str
    tgi_status: int
    tgi_type: str
    sagemaker_status: int
    sagemaker_code: str  # x-amzn-ErrorType on the runtime, `__type` on the control plane
    control_status: int | None = None  # on the control plane (AWS JSON), where it differs from sagemaker_status
    control_code: str | None = None  # `__type` on the control plane, where it differs from sagemaker_code

    @classmethod
    def of_status(cls, status: int) -> Wire:
        """For errors that carry their own status (a route's 404, a handler's 415): the same status everywhere."""
        client = status < 500
        return cls(status, "invalid_request_error" if client else "server_error",
                   status, _TGI_TYPES.get(status, "validation" if client else "generation"),
                   status, "ValidationError" if client else "InternalFailure")

    def with_status(self, status: int) -> Wire:
        return replace(self, status=status)


INTERNAL = Wire(500, "server_error", 500, "internal", 500, "InternalFailure")


class PierError(Exception):
    """Base of every error pier raises on purpose. `message` is written for the user: it says how to fix it.
    `code` is OpenAI's machine-readable `code` (None where OpenAI sends null); `param` the request field at
    fault, when one is."""

    code: str | None = "internal_error"
    wire = INTERNAL

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param

    def members(self) -> dict[str, Any]:
        """Modelled members of the SageMaker runtime's error shape besides the message."""
        return {}


class InvalidRequest(PierError):
    """The request itself is wrong (a value out of range, a missing field); retrying it unchanged fails again."""

    code = "invalid_request"
    wire = Wire(400, "invalid_request_error", 422, "validation", 400, "ValidationError")


class ContextLengthExceeded(InvalidRequest):
    """Prompt plus requested output does not fit in the context window."""

    code = "context_length_exceeded"

    def __init__(self, message: str, *, prompt_tokens: int, max_tokens: int, limit: int) -> None:
        super().__init__(message, param="messages")
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.limit = limit

    @classmethod
    def requested(cls, limit: int, prompt_tokens: int, max_tokens: int, *, max_prompt: int | None = None
                  ) -> ContextLengthExceeded:
        """Prompt plus max_tokens over `limit`, in OpenAI's words (clients match on its first sentence).
        `max_prompt`: the longest prompt taken (default: one token short of `limit`)."""
        return cls(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} in the completion). "
            f"{_fix(limit, prompt_tokens, limit - 1 if max_prompt is None else max_prompt)}",
            prompt_tokens=prompt_tokens, max_tokens=max_tokens, limit=limit,
        )


def _fix(limit: int, prompt_tokens: int, max_prompt: int) -> str:
    """What to change: a prompt that leaves no room for one token cannot be helped by any max_tokens."""
    if prompt_tokens >= limit:
        return (f"The prompt alone fills the context: no max_tokens fits. Shorten the prompt to at most {max_prompt} "
                "tokens.")
    return f"Please reduce the prompt or the completion length (max_tokens <= {limit - prompt_tokens} for this prompt)."


class InputTooLong(ContextLengthExceeded):
    """The prompt alone is over MAX_INPUT_TOKENS (TGI's max_input_tokens)."""


class ResponseNotStored(PierError):
    """A stored response asked for (OpenAI's GET / DELETE /v1/responses/ID): pier keeps none."""

    code = "not_found"
    wire = Wire.of_status(404)

    def __init__(self, response_id: str) -> None:
        super().__init__(f"Response with id {response_id!r} not found: pier keeps no responses (it answers as if "
                         "`store` were false). Keep the response you were sent, and send the whole conversation "
                         "in `input` of the next request.", param="response_id")


class Overloaded(PierError):
    """Too much work in flight right now; retrying later succeeds."""

    code = "overloaded"
    wire = Wire(429, "rate_limit_error", 429, "overloaded", 429, "ThrottlingException")


class NotReady(PierError):
    """The model is still loading."""

    code = "model_not_ready"
    wire = Wire(503, "service_unavailable_error", 503, "unavailable", 429, "ModelNotReadyException")


class EngineStopped(PierError):
    """The engine is shutting down or has died and accepts no new work."""

    code = "engine_stopped"
    wire = Wire(503, "service_unavailable_error", 503, "unavailable", 503, "ServiceUnavailable")


class GenerationFailed(PierError):
    """Generation started but could not complete (the model failed, or a deadline passed)."""

    code = "generation_failed"
    wire = Wire(500, "server_error", 424, "generation", 424, "ModelError")


class ClientGone(Exception):
    """The client hung up before its answer was ready (while its body was read, or while it waited): nothing is
    sent back."""


CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that hung up; only logs and metrics see it


def message_of(error: BaseException) -> str:
    """What the user reads: a pier error's own message, or, for anything else, that it is a bug."""
    if isinstance(error, PierError):
        return error.message
    return f"Internal error ({type(error).__name__}: {error}); this is a pier bug, please report it with the request."


def wire_of(error: BaseException) -> Wire:
    return error.wire if isinstance(error, PierError) else INTERNAL

