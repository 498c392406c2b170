"""Every refusal is a PierError whose wire fields (pier.errors.Wire) read as AWS and OpenAI answer (pure)."""

from __future__ import annotations

import json

import pytest

from pier.dialect import Dialect
from pier.errors import PierError
from pier.security.errors import (
    AccessDenied,
    AuthFailure,
    BodyTooLarge,
    ExpiredKey,
    IncompleteSignature,
    InvalidSignature,
    KeysUnreadable,
    MissingAuthenticationToken,
    NoUsableKey,
    RequestRefused,
    UnrecognizedClient,
)
from pier.security.refusal import refusal_response

Answer = tuple[int, str | None]


@pytest.mark.parametrize(
    ("failure", "control", "runtime", "openai"),
    [
        (MissingAuthenticationToken(), (403, "MissingAuthenticationTokenException"),
         (403, "MissingAuthenticationTokenException"), (401, None)),
        (IncompleteSignature("x"), (400, "IncompleteSignatureException"), (400, "IncompleteSignatureException"),
         (401, "invalid_api_key")),
        (UnrecognizedClient(), (403, "UnrecognizedClientException"), (403, "UnrecognizedClientException"),
         (401, "invalid_api_key")),
        (InvalidSignature("x"), (403, "InvalidSignatureException"), (403, "InvalidSignatureException"),
         (401, "invalid_api_key")),
        (ExpiredKey("k", "then"), (403, "ExpiredTokenException"), (403, "ExpiredTokenException"),
         (401, "invalid_api_key")),
        (NoUsableKey("no key"), (403, "UnrecognizedClientException"), (403, "UnrecognizedClientException"),
         (401, "invalid_api_key")),
        (AccessDenied("x"), (400, "AccessDeniedException"), (403, "AccessDeniedException"),
         (403, "insufficient_permissions")),
        (RequestRefused("x"), (403, "AccessDeniedException"), (403, "AccessDeniedException"),
         (403, "forbidden_origin")),
        (BodyTooLarge("x"), (413, "ValidationException"), (413, "ValidationError"), (413, "request_too_large")),
        (KeysUnreadable(), (403, "UnrecognizedClientException"), (403, "UnrecognizedClientException"),
         (401, "invalid_api_key")),
    ],
)
def test_a_refusal_in_each_dialect(failure: AuthFailure, control: Answer, runtime: Answer, openai: Answer) -> None:
    assert isinstance(failure, PierError)
    answer = refusal_response(Dialect.CONTROL, failure, "r")
    assert (answer.status_code, json.loads(bytes(answer.body))["__type"]) == control
    assert answer.headers["x-amzn-ErrorType"] == control[1]
    for dialect in (Dialect.RUNTIME, Dialect.PIER, Dialect.SAGEMAKER):
        answer = refusal_response(dialect, failure, "r")
        assert (answer.status_code, answer.headers["x-amzn-ErrorType"]) == runtime
        assert json.loads(bytes(answer.body)) == {"message": failure.message}
    answer = refusal_response(Dialect.OPENAI, failure, "r")
    error = json.loads(bytes(answer.body))["error"]
    assert (answer.status_code, error["code"]) == openai
    assert error["type"] == ("server_error" if openai[0] >= 500 else "invalid_request_error")
    assert error["message"] == failure.message and error["param"] is None
    assert ("WWW-Authenticate" in answer.headers) == (openai[0] == 401)
