"""The one place where pier's errors become each API's wire shape and status.

OpenAI clients read `{"error": {"message", "type", "param", "code"}}`, TGI clients `{"error", "error_type"}`,
and SageMaker's inference toolkit (bring-your-own-code mode) `{"code", "type", "message"}`. A request keeps
one flavor from its route (or, on /invocations, from the payload's shape) for every error it can meet,
before the response starts (a status and a body) or after (an SSE event).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection

from pier.errors import (
    REFUSED_HEADER,
    ContextLengthExceeded,
    EngineStopped,
    GenerationFailed,
    InvalidRequest,
    Overloaded,
    PierError,
)

RETRY_AFTER_S = 1


class Flavor(StrEnum):
    OPENAI = "openai"
    TGI = "tgi"
    SAGEMAKER = "sagemaker"


class HttpError(PierError):
    """An error with its own HTTP status: the router's (404, 405), the payload limit's (413)."""

    code = "http_error"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class InputTooLong(ContextLengthExceeded):
    """The prompt alone is over MAX_INPUT_TOKENS (TGI's max_input_tokens)."""


class NotReady(PierError):
    code = "model_not_ready"


class ShuttingDown(EngineStopped):
    code = "shutting_down"


class DeadlineExceeded(GenerationFailed):
    code = "timeout"


class ClientDisconnected(Exception):
    """The client went away before its answer was ready; nothing is sent back."""


CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that hung up; it only shows in metrics and logs


@dataclass(frozen=True)
class _Kind:
    openai_status: int
    tgi_status: int
    openai_type: str
    tgi_type: str


_GENERIC_CODES = {"invalid_request", "http_error"}  # OpenAI sends code null for these
_TGI_TYPES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def _kind(error: BaseException) -> _Kind:
    """An error that carries its own HTTP status (HttpError, a bring-your-own handler's) keeps it in every
    flavor; the others by class, most specific first."""
    status = getattr(error, "status", None)
    if isinstance(error, PierError) and isinstance(status, int) and 400 <= status <= 599:
        client = status < 500
        tgi_type = _TGI_TYPES.get(status, "validation" if client else "generation")
        return _Kind(status, status, "invalid_request_error" if client else "server_error", tgi_type)
    table: list[tuple[type[BaseException], _Kind]] = [
        (InvalidRequest, _Kind(400, 422, "invalid_request_error", "validation")),
        (Overloaded, _Kind(429, 429, "rate_limit_error", "overloaded")),
        (NotReady, _Kind(503, 503, "service_unavailable_error", "unavailable")),
        (EngineStopped, _Kind(503, 503, "service_unavailable_error", "unavailable")),
        (DeadlineExceeded, _Kind(424, 424, "timeout_error", "generation")),
        (GenerationFailed, _Kind(500, 424, "server_error", "generation")),
    ]
    unexpected = _Kind(500, 500, "server_error", "internal")
    return next((kind for cls, kind in table if isinstance(error, cls)), unexpected)


def _message(error: BaseException) -> str:
    if isinstance(error, PierError):
        return error.message
    return (
        f"Internal error ({type(error).__name__}: {error}); this is a pier bug, "
        "please report it with the request."
    )


def _tgi_message(error: BaseException) -> str:
    """TGI words its validation errors in terms of `inputs` and `max_new_tokens`; clients match on them."""
    if isinstance(error, InputTooLong):
        return (
            f"Input validation error: `inputs` must have less than {error.limit} tokens. "
            f"Given: {error.prompt_tokens}"
        )
    if isinstance(error, ContextLengthExceeded):
        return (
            f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {error.limit}. "
            f"Given: {error.prompt_tokens} `inputs` tokens and {error.max_tokens} `max_new_tokens`"
        )
    if isinstance(error, InvalidRequest):
        return f"Input validation error: {_message(error)}"
    return _message(error)


def error_body(error: BaseException, flavor: Flavor) -> tuple[int, dict[str, Any]]:
    kind = _kind(error)
    if flavor is Flavor.OPENAI:
        code = error.code if isinstance(error, PierError) and error.code not in _GENERIC_CODES else None
        param = error.param if isinstance(error, PierError) else None
        body = {"error": {"message": _message(error), "type": kind.openai_type, "param": param, "code": code}}
        return kind.openai_status, body
    if flavor is Flavor.TGI:
        return kind.tgi_status, {"error": _tgi_message(error), "error_type": kind.tgi_type}
    status = kind.openai_status
    return status, {"code": status, "type": type(error).__name__, "message": _message(error)}


def _headers(status: int, error: BaseException) -> dict[str, str]:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status in {429, 503} else {}
    if isinstance(error, NotReady | ShuttingDown | Overloaded):  # raised before any work on the request
        headers[REFUSED_HEADER] = error.code
    return headers


def error_response(error: BaseException, flavor: Flavor) -> JSONResponse:
    status, body = error_body(error, flavor)
    return JSONResponse(body, status_code=status, headers=_headers(status, error))


def error_event(error: BaseException, flavor: Flavor) -> bytes:
    """An error after a stream has started: the last event the client sees, never a silent cut."""
    _, body = error_body(error, flavor)
    separator = ":" if flavor is Flavor.TGI else ": "
    return f"data{separator}{json.dumps(body)}\n\n".encode()


def http_error(status: int, detail: str, flavor: Flavor) -> JSONResponse:
    """Errors the router raises itself (404, 405, 413) in the flavor's shape."""
    return error_response(HttpError(status, detail), flavor)


def validation_error(errors: Sequence[Any], flavor: Flavor) -> JSONResponse:
    """A body that is not JSON or has the wrong types: 400 (OpenAI) or 422 (TGI), naming the field."""
    message, param = describe_validation(errors)
    return error_response(InvalidRequest(message, param=param), flavor)


def describe_validation(errors: Sequence[Any]) -> tuple[str, str | None]:
    first = dict(errors[0]) if errors else {"msg": "invalid body", "loc": ()}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "malformed JSON")
        return f"The request body is not valid JSON ({reason}); send a JSON object.", None
    if not loc:
        return (
            "The request body must be a JSON object sent with Content-Type: application/json "
            f"({first.get('msg', 'not an object')})."
        ), None
    path = ".".join(loc)
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    problem = first.get("msg", "invalid value")
    return f"Invalid request body: `{path}`: {problem}{more}. Fix it and retry.", path


def flavor_of(connection: HTTPConnection | dict[str, Any]) -> Flavor:
    """The error shape for a request: the app's only one (bring-your-own-code mode), what /invocations
    detected, else its route's."""
    scope = connection.scope if isinstance(connection, HTTPConnection) else connection
    only = getattr(getattr(scope.get("app"), "state", None), "flavor", None)
    chosen = scope.get("state", {}).get("flavor")
    for flavor in (only, chosen):
        if isinstance(flavor, Flavor):
            return flavor
    path: str = scope.get("path", "")
    if path.startswith("/v1/"):
        return Flavor.OPENAI
    if path in {"/ping", "/execution-parameters"}:
        return Flavor.SAGEMAKER
    return Flavor.TGI
