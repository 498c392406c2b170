"""Each dialect's renderer: status, headers and body for each kind of error (pure, table-driven)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.responses import JSONResponse

from pier.error_bodies import (
    AMZ_JSON,
    Dialect,
    ErrorAnswer,
    aws_json_answer,
    openai_answer,
    pier_answer,
    render,
    runtime_answer,
    tgi_answer,
    toolkit_answer,
)
from pier.errors import (
    ContextLengthExceeded,
    GenerationFailed,
    InputTooLong,
    InvalidRequest,
    NotReady,
    Overloaded,
    PierError,
)


class _WithMembers(GenerationFailed):
    def members(self) -> dict[str, Any]:
        return {"OriginalStatusCode": 500}


BUG = KeyError("k")
BUG_MESSAGE = "Internal error (KeyError: 'k'); this is a pier bug, please report it with the request."

RENDERED = [
    # error, dialect, status, body, headers (besides content-type)
    (InvalidRequest("bad", param="top_p"), Dialect.RUNTIME, 400, {"message": "bad"},
     {"x-amzn-ErrorType": "ValidationError", "x-amzn-RequestId": "r"}),
    (_WithMembers("broke"), Dialect.RUNTIME, 424, {"message": "broke", "OriginalStatusCode": 500},
     {"x-amzn-ErrorType": "ModelError", "x-amzn-RequestId": "r"}),
    (NotReady("loading"), Dialect.RUNTIME, 429, {"message": "loading"},
     {"x-amzn-ErrorType": "ModelNotReadyException", "x-amzn-RequestId": "r", "Retry-After": "1"}),
    (BUG, Dialect.RUNTIME, 500, {"message": BUG_MESSAGE},
     {"x-amzn-ErrorType": "InternalFailure", "x-amzn-RequestId": "r"}),
    (InvalidRequest("bad"), Dialect.CONTROL, 400, {"__type": "ValidationError", "message": "bad"},
     {"x-amzn-RequestId": "r"}),
    (PierError("oops"), Dialect.CONTROL, 500, {"__type": "InternalFailure", "message": "oops"},
     {"x-amzn-RequestId": "r"}),
    (Overloaded("busy"), Dialect.CONTROL, 429, {"__type": "ThrottlingException", "message": "busy"},
     {"x-amzn-RequestId": "r", "Retry-After": "1"}),
    (InvalidRequest("bad", param="top_p"), Dialect.OPENAI, 400,
     {"error": {"message": "bad", "type": "invalid_request_error", "param": "top_p", "code": "invalid_request"}},
     {"x-request-id": "r"}),
    (NotReady("loading"), Dialect.OPENAI, 503,
     {"error": {"message": "loading", "type": "service_unavailable_error", "param": None, "code": "model_not_ready"}},
     {"x-request-id": "r", "Retry-After": "1"}),
    (BUG, Dialect.OPENAI, 500,
     {"error": {"message": BUG_MESSAGE, "type": "server_error", "param": None, "code": None}},
     {"x-request-id": "r"}),
    (InvalidRequest("bad"), Dialect.TGI, 422, {"error": "Input validation error: bad", "error_type": "validation"}, {}),
    (GenerationFailed("broke"), Dialect.TGI, 424, {"error": "broke", "error_type": "generation"}, {}),
    (Overloaded("busy"), Dialect.TGI, 429, {"error": "busy", "error_type": "overloaded"}, {"Retry-After": "1"}),
    (InvalidRequest("bad"), Dialect.SAGEMAKER, 400, {"code": 400, "type": "InvalidRequest", "message": "bad"}, {}),
    (BUG, Dialect.SAGEMAKER, 500, {"code": 500, "type": "KeyError", "message": BUG_MESSAGE}, {}),
    (NotReady("loading"), Dialect.PIER, 503, {"message": "loading"}, {"Retry-After": "1"}),
]


@pytest.mark.parametrize(("error", "dialect", "status", "body", "headers"), RENDERED)
def test_render(error: BaseException, dialect: Dialect, status: int, body: dict[str, Any],
                headers: dict[str, str]) -> None:
    answer = render(error, dialect, "r")
    assert (answer.status, answer.body, dict(answer.headers)) == (status, body, headers)


@pytest.mark.parametrize(
    ("answer", "status", "body", "headers", "media_type"),
    [
        (runtime_answer(403, "AccessDeniedException", "no"), 403, {"message": "no"},
         {"x-amzn-ErrorType": "AccessDeniedException"}, "application/json"),
        (aws_json_answer(400, "AccessDeniedException", "no", request_id="r"), 400,
         {"__type": "AccessDeniedException", "message": "no"}, {"x-amzn-RequestId": "r"}, AMZ_JSON),
        (openai_answer(401, "no", code="invalid_api_key"), 401,
         {"error": {"message": "no", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}},
         {}, "application/json"),
        (openai_answer(500, "broken", code="server_error", request_id="r"), 500,
         {"error": {"message": "broken", "type": "server_error", "param": None, "code": "server_error"}},
         {"x-request-id": "r"}, "application/json"),
        (tgi_answer(503, "loading", "healthcheck"), 503, {"error": "loading", "error_type": "healthcheck"}, {},
         "application/json"),
        (toolkit_answer(403, "Forbidden", "no"), 403, {"code": 403, "type": "Forbidden", "message": "no"}, {},
         "application/json"),
        (pier_answer(404, "no copy"), 404, {"message": "no copy"}, {}, "application/json"),
    ],
)
def test_renderers_from_fields(answer: ErrorAnswer, status: int, body: dict[str, Any], headers: dict[str, str],
                               media_type: str) -> None:
    assert (answer.status, answer.body, dict(answer.headers), answer.media_type) == (status, body, headers,
                                                                                       media_type)


def test_tgi_words_length_errors_as_tgi_does() -> None:
    total = ContextLengthExceeded("...", prompt_tokens=4000, max_tokens=200, limit=4096)
    alone = InputTooLong("...", prompt_tokens=3000, max_tokens=10, limit=2048)
    assert render(total, Dialect.TGI).body["error"] == (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
        "Given: 4000 `inputs` tokens and 200 `max_new_tokens`"
    )
    assert render(alone, Dialect.TGI).body["error"] == (
        "Input validation error: `inputs` must have less than 2048 tokens. Given: 3000"
    )


def test_a_dialect_without_a_request_id_header_ignores_it() -> None:
    for dialect in (Dialect.TGI, Dialect.SAGEMAKER, Dialect.PIER):
        assert not render(InvalidRequest("bad"), dialect, "r").headers


def test_the_response_is_what_jsonresponse_would_send() -> None:
    answer = render(InvalidRequest("caf\u00e9 \u2014 bad"), Dialect.CONTROL, "r")
    response = answer.response()
    same = JSONResponse(answer.body, answer.status, headers=dict(answer.headers), media_type=AMZ_JSON)
    assert response.body == same.body and json.loads(response.body) == answer.body
    assert response.status_code == 400 and response.headers == same.headers


def test_with_headers_adds_without_changing_the_original() -> None:
    answer = pier_answer(503, "draining")
    more = answer.with_headers({"X-Pier-Refused": "shutting_down"})
    assert dict(more.headers) == {"X-Pier-Refused": "shutting_down"} and not answer.headers
