"""A refusal as the response each dialect's clients parse: botocore's JSON 1.1 parser (`__type`), its
rest-json parser (`x-amzn-ErrorType`), or the openai client (`{"error": {...}}`)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from pier.dialect import Dialect
from pier.security.errors import AuthFailure

AMZ_JSON = "application/x-amz-json-1.1"
REQUEST_ID = "x-amzn-RequestId"
ERROR_TYPE = "x-amzn-ErrorType"


def refusal_response(dialect: Dialect, failure: AuthFailure, request_id: str) -> JSONResponse:
    if dialect is Dialect.CONTROL:
        code = failure.json_code or failure.code
        return JSONResponse({"__type": code, "message": failure.message}, failure.json_status,
                            headers={REQUEST_ID: request_id, ERROR_TYPE: code}, media_type=AMZ_JSON)
    if dialect is Dialect.OPENAI:
        error = {"message": failure.message, "type": _openai_type(failure.openai_status), "param": None,
                 "code": failure.openai_code}
        headers = {"x-request-id": request_id}
        if failure.openai_status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="pier"'
        return JSONResponse({"error": error}, failure.openai_status, headers=headers)
    return JSONResponse({"message": failure.message}, failure.rest_status,
                        headers={REQUEST_ID: request_id, ERROR_TYPE: failure.code})


def _openai_type(status: int) -> str:
    return "server_error" if status >= 500 else "invalid_request_error"
