"""How a copy answers errors: each flavor renders an error's wire fields (`pier.errors.Wire`) in its shape.

OpenAI clients read `{"error": {"message", "type", "param", "code"}}`, TGI clients `{"error", "error_type"}`,
and SageMaker's inference toolkit (bring-your-own-code mode) `{"code", "type", "message"}`. A request keeps
one flavor from its route (or, on /invocations, from the payload's shape) for every error it can meet,
before the response starts (a status and a body) or after (an SSE event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar

from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection

from pier.channel.refusal import REFUSED_HEADER
from pier.dialect import Dialect, dialect_of
from pier.errors import (
    RETRY_AFTER_S,
    RETRY_STATUSES,
    ContextLengthExceeded,
    EngineStopped,
    GenerationFailed,
    InvalidRequest,
    NotReady,
    Overloaded,
    PierError,
    Wire,
    message_of,
    openai_error_body,
    wire_of,
)


class Flavor(StrEnum):
    OPENAI = "openai"
    TGI = "tgi"
    SAGEMAKER = "sagemaker"


# A copy speaks three of the dialects; a path in none of them (its own routes, or none) answers in TGI's shape.
FLAVORS = {Dialect.OPENAI: Flavor.OPENAI, Dialect.SAGEMAKER: Flavor.SAGEMAKER, Dialect.TGI: Flavor.TGI}


class HttpError(PierError):
    """An error with its own HTTP status: the router's (404, 405), the payload limit's (413)."""

    _CODES: ClassVar[dict[int, str]] = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.wire = Wire.of_status(status)
        self.code = self._CODES.get(status, "http_error")


class InputTooLong(ContextLengthExceeded):
    """The prompt alone is over MAX_INPUT_TOKENS (TGI's max_input_tokens)."""


class ShuttingDown(EngineStopped):
    code = "shutting_down"


class DeadlineExceeded(GenerationFailed):
    code = "timeout"
    wire = Wire(424, "timeout_error", 424, "generation", 424, "ModelError")


class TooDeeplyNested(InvalidRequest):
    """A JSON body nested deeper than the parser goes (Python's json stops near 1,000 levels). 400 on every route,
    as TGI's own router answers it (serde_json's recursion limit is a syntax error to axum)."""

    code = "invalid_json"
    wire = Wire(400, "invalid_request_error", 400, "validation", 400, "ValidationError")

    def __init__(self) -> None:
        super().__init__("The request body nests JSON arrays or objects too deeply to be read (about 1,000 levels "
                         "at most); send a flatter body.")


class ClientDisconnected(Exception):
    """The client went away before its answer was ready; nothing is sent back."""


CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that hung up; it only shows in metrics and logs


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
        return f"Input validation error: {message_of(error)}"
    return message_of(error)


def error_body(error: BaseException, flavor: Flavor) -> tuple[int, dict[str, Any]]:
    wire = wire_of(error)
    if flavor is Flavor.OPENAI:
        return wire.status, openai_error_body(error)
    if flavor is Flavor.TGI:
        return wire.tgi_status, {"error": _tgi_message(error), "error_type": wire.tgi_type}
    # The inference toolkit's shape, for bring-your-own-code copies.
    return wire.status, {"code": wire.status, "type": type(error).__name__, "message": message_of(error)}


def _headers(status: int, error: BaseException) -> dict[str, str]:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status in RETRY_STATUSES else {}
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
    first: dict[str, Any] = dict(errors[0]) if errors else {"msg": "invalid body", "loc": ()}
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


def flavor_of(connection: HTTPConnection | Mapping[str, Any]) -> Flavor:
    """The error shape for a request: the app's only one (bring-your-own-code mode), what /invocations
    detected, else its route's."""
    scope = connection.scope if isinstance(connection, HTTPConnection) else connection
    only = getattr(getattr(scope.get("app"), "state", None), "flavor", None)
    chosen = scope.get("state", {}).get("flavor")
    for flavor in (only, chosen):
        if isinstance(flavor, Flavor):
            return flavor
    return FLAVORS.get(dialect_of(scope.get("path", "")), Flavor.TGI)
