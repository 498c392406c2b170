"""Each pier error in each dialect's wire shape and status."""

from __future__ import annotations

import json

import pytest

from pier.dialect import Dialect
from pier.errors import (
    ContextLengthExceeded,
    EngineStopped,
    GenerationFailed,
    InputTooLong,
    InvalidRequest,
    NotReady,
    Overloaded,
)
from pier.server.errors import (
    DeadlineExceeded,
    HttpError,
    error_body,
    error_event,
    error_response,
    request_dialect,
)

CASES = [
    # error, OpenAI status, OpenAI type, TGI status, TGI error_type
    (InvalidRequest("bad top_p", param="top_p"), 400, "invalid_request_error", 422, "validation"),
    (HttpError(413, "too big"), 413, "invalid_request_error", 413, "payload_too_large"),
    (HttpError(404, "no route"), 404, "invalid_request_error", 404, "not_found"),
    (Overloaded("busy"), 429, "rate_limit_error", 429, "overloaded"),
    (NotReady("loading"), 503, "service_unavailable_error", 503, "unavailable"),
    (EngineStopped("stopping"), 503, "service_unavailable_error", 503, "unavailable"),
    (DeadlineExceeded("slow"), 424, "timeout_error", 424, "generation"),
    (GenerationFailed("broke"), 500, "server_error", 424, "generation"),
    (KeyError("bug"), 500, "server_error", 500, "internal"),
]


@pytest.mark.parametrize(("error", "openai_status", "openai_type", "tgi_status", "tgi_type"), CASES)
def test_status_and_type_per_flavor(
    error: Exception, openai_status: int, openai_type: str, tgi_status: int, tgi_type: str
) -> None:
    status, body = error_body(error, Dialect.OPENAI)
    assert status == openai_status and body["error"]["type"] == openai_type
    assert set(body["error"]) == {"message", "type", "param", "code"}
    status, body = error_body(error, Dialect.TGI)
    assert status == tgi_status and body["error_type"] == tgi_type and set(body) == {"error", "error_type"}
    status, body = error_body(error, Dialect.SAGEMAKER)
    assert status == openai_status and body["type"] == type(error).__name__ and body["code"] == status


def test_context_length_in_each_flavors_words() -> None:
    error = ContextLengthExceeded(
        "This model's maximum context length is 4096 tokens. ...", prompt_tokens=4000, max_tokens=200, limit=4096
    )
    _, openai = error_body(error, Dialect.OPENAI)
    _, tgi = error_body(error, Dialect.TGI)
    assert openai["error"]["code"] == "context_length_exceeded"
    assert openai["error"]["message"].startswith("This model's maximum context length is 4096 tokens.")
    assert tgi["error"] == (
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
        "Given: 4000 `inputs` tokens and 200 `max_new_tokens`"
    )
    too_long = InputTooLong("...", prompt_tokens=3000, max_tokens=10, limit=2048)
    assert error_body(too_long, Dialect.TGI)[1]["error"] == (
        "Input validation error: `inputs` must have less than 2048 tokens. Given: 3000"
    )


def test_unexpected_errors_say_they_are_bugs() -> None:
    _, body = error_body(ValueError("boom"), Dialect.OPENAI)
    assert "ValueError: boom" in body["error"]["message"] and "bug" in body["error"]["message"]


def test_retry_after_on_429_and_503_only() -> None:
    assert error_response(Overloaded("busy"), Dialect.TGI).headers["retry-after"] == "1"
    assert error_response(NotReady("loading"), Dialect.OPENAI).headers["retry-after"] == "1"
    assert "retry-after" not in error_response(InvalidRequest("no"), Dialect.OPENAI).headers


def test_error_events() -> None:
    openai = error_event(DeadlineExceeded("slow"), Dialect.OPENAI)
    tgi = error_event(DeadlineExceeded("slow"), Dialect.TGI)
    assert openai.startswith(b"data: {") and openai.endswith(b"\n\n")
    assert json.loads(openai[len(b"data: ") :])["error"]["code"] == "timeout"
    assert tgi.startswith(b"data:{") and json.loads(tgi[len(b"data:") :])["error"] == "slow"


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/v1/chat/completions", Dialect.OPENAI),
        ("/v1/models", Dialect.OPENAI),
        ("/generate", Dialect.TGI),
        ("/invocations", Dialect.TGI),
        ("/ping", Dialect.SAGEMAKER),
        ("/anything", Dialect.TGI),
    ],
)
def test_flavor_by_route(path: str, dialect: Dialect) -> None:
    assert request_dialect({"path": path}) is dialect


def test_a_detected_flavor_wins_over_the_route() -> None:
    assert request_dialect({"path": "/invocations", "state": {"dialect": Dialect.OPENAI}}) is Dialect.OPENAI
