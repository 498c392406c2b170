"""A refusal as the response each route family's clients parse: botocore's JSON 1.1 parser (`__type`), its
rest-json parser (`x-amzn-ErrorType`), or the openai client (`{"error": {...}}`)."""

from __future__ import annotations

from starlette.responses import Response

from pier.error_bodies import AMZ_ERROR_TYPE, aws_json_answer, openai_answer, sagemaker_answer
from pier.security.errors import AuthFailure
from pier.security.routes import Family


def refusal_response(family: Family, failure: AuthFailure, request_id: str) -> Response:
    if family is Family.CONTROL:
        code = failure.json_code or failure.code
        answer = aws_json_answer(failure.json_status, code, failure.message, request_id=request_id)
        return answer.with_headers({AMZ_ERROR_TYPE: code}).response()
    if family is Family.OPENAI:
        answer = openai_answer(failure.openai_status, failure.message, code=failure.openai_code, request_id=request_id)
        if failure.openai_status == 401:
            answer = answer.with_headers({"WWW-Authenticate": 'Bearer realm="pier"'})
        return answer.response()
    return sagemaker_answer(failure.rest_status, failure.code, failure.message, request_id=request_id).response()
