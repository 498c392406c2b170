"""How a copy answers errors: the request's dialect (pier.error_bodies) renders an error's wire fields.

OpenAI clients read `{"error": {"message", "type", "param", "code"}}`, TGI clients `{"error", "error_type"}`,
and SageMaker's inference toolkit (bring-your-own-code mode) `{"code", "type", "message"}`. A request keeps
one dialect from its route (or, on /invocations, from the payload's shape) for every error it can meet,
before the response starts (a status and a body) or after (an SSE event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from starlette.requests import HTTPConnection
from starlette.responses import Response

from pier.channel.headers import REFUSED_HEADER
from pier.dialect import Dialect, dialect_of
from pier.error_bodies import render
from pier.errors import (
    EngineStopped,
    GenerationFailed,
    InvalidRequest,
    NotReady,
    Overloaded,
    PierError,
    Wire,
)

# A copy speaks three of the dialects; a path in none of them (its own routes, or none) answers in TGI's shape.
COPY_DIALECTS = frozenset({Dialect.OPENAI, Dialect.SAGEMAKER, Dialect.TGI})


class HttpError(PierError):
    """An error with its own HTTP status: the router's (404, 405), the payload limit's (413)."""

    _CODES: ClassVar[dict[int, str]] = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.wire = Wire.of_status(status)
        self.code = self._CODES.get(status, "http_error")


class ModelNotServed(InvalidRequest):
    """GET /v1/models/{model} for a name the copy does not serve: OpenAI's 404, in its words."""

    code = "model_not_found"
    wire = InvalidRequest.wire.with_status(404)

    def __init__(self, model: str, served: str) -> None:
        super().__init__(f"The model `{model}` does not exist or you do not have access to it. This server serves "
                         f"`{served}` (GET /v1/models).")


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


def error_body(error: BaseException, dialect: Dialect) -> tuple[int, dict[str, Any]]:
    answer = render(error, dialect)
    return answer.status, answer.body


def error_response(error: BaseException, dialect: Dialect) -> Response:
    answer = render(error, dialect)
    if isinstance(error, NotReady | ShuttingDown | Overloaded):  # raised before any work on the request
        answer = answer.with_headers({REFUSED_HEADER: error.code})
    return answer.response()


def error_event(error: BaseException, dialect: Dialect) -> bytes:
    """An error after a stream has started: the last event the client sees, never a silent cut."""
    _, body = error_body(error, dialect)
    separator = ":" if dialect is Dialect.TGI else ": "
    return f"data{separator}{json.dumps(body)}\n\n".encode()


def http_error(status: int, detail: str, dialect: Dialect) -> Response:
    """Errors the router raises itself (404, 405, 413) in the dialect's shape."""
    return error_response(HttpError(status, detail), dialect)


def validation_error(errors: Sequence[Any], dialect: Dialect) -> Response:
    """A body that is not JSON or has the wrong types: 400 (OpenAI) or 422 (TGI), naming the field."""
    message, param = describe_validation(errors)
    return error_response(InvalidRequest(message, param=param), dialect)


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
    fields = _by_field(errors)
    path, problems = next(iter(fields.items()))
    more = f" (and {len(fields) - 1} more problem{'s' if len(fields) > 2 else ''})" if len(fields) > 1 else ""
    if problems[0][0] is None:
        return f"Invalid request body: `{path}`: {problems[0][1]}{more}. Fix it and retry.", path
    tried = "; ".join(f"{member}: {msg}" for member, msg in problems)
    return f"Invalid request body: `{path}` is none of its accepted types ({tried}){more}. Fix it and retry.", path


# The names pydantic gives builtin types as members of a union, in an error's loc (`stop.str`, `stop.list[str]`).
_TYPE_NAMES = frozenset({"str", "int", "float", "bool", "dict", "list", "bytes", "none"})


def _is_member(part: str) -> bool:
    """Whether a part of an error's loc is pydantic's name of a union's member (`str`, `list[str]`, `TextPart`)
    rather than a field (OpenAI's fields are snake_case) or a list index."""
    if part.isdigit():
        return False
    return part in _TYPE_NAMES or not part.isidentifier() or part[:1].isupper()


def _by_field(errors: Sequence[Any]) -> dict[str, list[tuple[str | None, str]]]:
    """Each field's problems, in order: one value that is none of a union's types fails once per member, and the
    client should read the field it sent (`stop`), with what each member wanted, not one member's name as the
    field (`stop.str`)."""
    fields: dict[str, list[tuple[str | None, str]]] = {}
    for error in errors:
        loc = [str(part) for part in error.get("loc", ()) if part != "body"]
        at = next((i for i, part in enumerate(loc) if _is_member(part)), len(loc))
        member = None if at == len(loc) else loc[at] + _within(loc[at + 1:])
        fields.setdefault(".".join(loc[:at]), []).append((member, str(error.get("msg", "invalid value"))))
    return fields


def _within(rest: Sequence[str]) -> str:
    if not rest:
        return ""
    return f", item {'.'.join(rest)}" if rest[0].isdigit() else f", {'.'.join(rest)}"


def request_dialect(connection: HTTPConnection | Mapping[str, Any]) -> Dialect:
    """The error shape for a request: the app's only one (bring-your-own-code mode), what /invocations
    detected, else its route's."""
    scope = connection.scope if isinstance(connection, HTTPConnection) else connection
    only = getattr(getattr(scope.get("app"), "state", None), "dialect", None)
    chosen = scope.get("state", {}).get("dialect")
    for dialect in (only, chosen):
        if isinstance(dialect, Dialect):
            return dialect
    dialect = dialect_of(scope.get("path", ""))
    return dialect if dialect in COPY_DIALECTS else Dialect.TGI
