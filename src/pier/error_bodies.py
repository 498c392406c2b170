"""Every error answer pier sends, one renderer per dialect: the status, headers and body its clients parse.

- RUNTIME: SageMaker's runtime, read by botocore's rest-json parser. Status `sagemaker_status`, code in the
  `x-amzn-ErrorType` header, body `{"message", ...modelled members}`, `x-amzn-RequestId`.
- CONTROL, CLOUDWATCH: the control plane, Application Auto Scaling and CloudWatch, read by botocore's JSON 1.0/1.1
  (and CBOR) parsers. Status `sagemaker_status`, body `{"__type", "message"}`, `x-amzn-RequestId`.
- OPENAI: the openai client. Status `status`, body `{"error": {"message", "type", "param", "code"}}`, `x-request-id`.
- TGI: TGI's clients. Status `tgi_status`, body `{"error", "error_type"}`.
- SAGEMAKER: a copy's container contract, in SageMaker's inference toolkit's shape (bring-your-own-code copies).
  Status `status`, body `{"code", "type", "message"}`.
- PIER: pier's own routes. Status `status`, body `{"message"}`.

Each dialect has a renderer from fields (`runtime_answer`, ...), for refusals that are not pier errors, and
`render()` from any error's wire fields (`pier.errors.Wire`), which also adds Retry-After to a 429 or a 503. The
request id is the caller's: a dialect without a request-id header ignores it. Which dialect a path speaks is the
caller's to decide.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.responses import Response

from pier.dialect import Dialect
from pier.errors import (
    RETRY_AFTER_S,
    RETRY_STATUSES,
    ContextLengthExceeded,
    InputTooLong,
    InvalidRequest,
    PierError,
    message_of,
    wire_of,
)

JSON = "application/json"
AMZ_JSON = "application/x-amz-json-1.1"
AMZ_REQUEST_ID = "x-amzn-RequestId"
AMZ_ERROR_TYPE = "x-amzn-ErrorType"
OPENAI_REQUEST_ID = "x-request-id"




@dataclass(frozen=True)
class ErrorAnswer:
    status: int
    body: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    media_type: str = JSON

    @property
    def content(self) -> bytes:
        """The body in JSON, byte for byte as starlette's JSONResponse writes it."""
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, indent=None,
                          separators=(",", ":")).encode("utf-8")

    def with_headers(self, headers: Mapping[str, str]) -> ErrorAnswer:
        return replace(self, headers={**self.headers, **headers})

    def response(self) -> Response:
        return Response(self.content, self.status, headers=dict(self.headers), media_type=self.media_type)


# ---- one renderer per dialect, from fields


def runtime_answer(status: int, code: str, message: str, *, members: Mapping[str, Any] | None = None,
                     request_id: str | None = None) -> ErrorAnswer:
    """botocore's rest-json parser reads the code from `x-amzn-ErrorType`, the message and modelled members
    (ModelError's OriginalStatusCode, ...) from the body."""
    headers = {AMZ_ERROR_TYPE: code, **_request_id(AMZ_REQUEST_ID, request_id)}
    return ErrorAnswer(status, {"message": message, **(members or {})}, headers)


def aws_json_answer(status: int, code: str, message: str, *, request_id: str | None = None) -> ErrorAnswer:
    """botocore's JSON parsers read the code from `__type` in the body."""
    return ErrorAnswer(status, {"__type": code, "message": message}, _request_id(AMZ_REQUEST_ID, request_id),
                       AMZ_JSON)


def openai_answer(status: int, message: str, *, kind: str | None = None, param: str | None = None,
                  code: str | None = None, request_id: str | None = None) -> ErrorAnswer:
    """`kind` is OpenAI's `type`; by default the one its status implies."""
    error = {"message": message, "type": kind or openai_type_of(status), "param": param, "code": code}
    return ErrorAnswer(status, {"error": error}, _request_id(OPENAI_REQUEST_ID, request_id))


def tgi_answer(status: int, message: str, error_type: str) -> ErrorAnswer:
    return ErrorAnswer(status, {"error": message, "error_type": error_type})


def toolkit_answer(status: int, kind: str, message: str) -> ErrorAnswer:
    return ErrorAnswer(status, {"code": status, "type": kind, "message": message})


def pier_answer(status: int, message: str) -> ErrorAnswer:
    return ErrorAnswer(status, {"message": message})


def openai_type_of(status: int) -> str:
    return "server_error" if status >= 500 else "invalid_request_error"


def _request_id(header: str, request_id: str | None) -> dict[str, str]:
    return {header: request_id} if request_id is not None else {}


# ---- any error, by its wire fields


def render(error: BaseException, dialect: Dialect, request_id: str | None = None) -> ErrorAnswer:
    """`error` as `dialect`'s clients read it; Retry-After on the statuses that ask to come back."""
    answer = _RENDERERS[dialect](error, request_id)
    if answer.status in RETRY_STATUSES:
        return answer.with_headers({"Retry-After": str(RETRY_AFTER_S)})
    return answer


def tgi_message(error: BaseException) -> str:
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


def _runtime(error: BaseException, request_id: str | None) -> ErrorAnswer:
    wire = wire_of(error)
    members = error.members() if isinstance(error, PierError) else {}
    return runtime_answer(wire.sagemaker_status, wire.sagemaker_code, message_of(error), members=members,
                            request_id=request_id)


def _aws_json(error: BaseException, request_id: str | None) -> ErrorAnswer:
    wire = wire_of(error)
    return aws_json_answer(wire.sagemaker_status, wire.sagemaker_code, message_of(error), request_id=request_id)


def _openai(error: BaseException, request_id: str | None) -> ErrorAnswer:
    pier = error if isinstance(error, PierError) else None
    wire = wire_of(error)
    return openai_answer(wire.status, message_of(error), kind=wire.openai_type, param=pier.param if pier else None,
                         code=pier.code if pier else None, request_id=request_id)


def _tgi(error: BaseException, request_id: str | None) -> ErrorAnswer:
    wire = wire_of(error)
    return tgi_answer(wire.tgi_status, tgi_message(error), wire.tgi_type)


def _sagemaker(error: BaseException, request_id: str | None) -> ErrorAnswer:
    return toolkit_answer(wire_of(error).status, type(error).__name__, message_of(error))


def _pier(error: BaseException, request_id: str | None) -> ErrorAnswer:
    return pier_answer(wire_of(error).status, message_of(error))


_RENDERERS: dict[Dialect, Callable[[BaseException, str | None], ErrorAnswer]] = {
    Dialect.RUNTIME: _runtime,
    Dialect.CONTROL: _aws_json,
    Dialect.CLOUDWATCH: _aws_json,  # the same fields, encoded as CBOR by autoscaling.wire
    Dialect.OPENAI: _openai,
    Dialect.TGI: _tgi,
    Dialect.SAGEMAKER: _sagemaker,  # a copy's container contract: the inference toolkit's shape
    Dialect.PIER: _pier,
}
