"""A refusal as the response each dialect's clients parse: botocore's JSON 1.1 parser (`__type`), its
rest-json parser (`x-amzn-ErrorType`), or the openai client (`{"error": {...}}`)."""

from __future__ import annotations

from starlette.responses import Response

from pier.dialect import Dialect
from pier.error_bodies import AMZ_ERROR_TYPE, aws_json_answer, openai_answer, runtime_answer
from pier.security.errors import AuthFailure


def refusal_response(dialect: Dialect, failure: AuthFailure, request_id: str) -> Response:
    wire = failure.wire
    if dialect is Dialect.CONTROL:
        code = wire.control_code or wire.sagemaker_code
        status = wire.control_status or wire.sagemaker_status
        answer = aws_json_answer(status, code, failure.message, request_id=request_id)
        return answer.with_headers({AMZ_ERROR_TYPE: code}).response()
    if dialect is Dialect.OPENAI:
        answer = openai_answer(wire.status, failure.message, code=failure.code, request_id=request_id)
        if wire.status == 401:
            answer = answer.with_headers({"WWW-Authenticate": 'Bearer realm="pier"'})
        return answer.response()
    return runtime_answer(wire.sagemaker_status, wire.sagemaker_code, failure.message,
                            request_id=request_id).response()
