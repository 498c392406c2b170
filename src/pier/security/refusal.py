"""A refusal as the response each dialect's clients parse: botocore's JSON 1.1 parser (`__type`), its
rest-json parser (`x-amzn-ErrorType`), or the openai client (`{"error": {...}}`)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from pier.dialect import Dialect
from pier.errors import openai_error_body
from pier.security.errors import AuthFailure

AMZ_JSON = "application/x-amz-json-1.1"
REQUEST_ID = "x-amzn-RequestId"
ERROR_TYPE = "x-amzn-ErrorType"


def refusal_response(dialect: Dialect, failure: AuthFailure, request_id: str) -> JSONResponse:
    wire = failure.wire
    if dialect is Dialect.CONTROL:
        code = wire.control_code or wire.sagemaker_code
        return JSONResponse({"__type": code, "message": failure.message}, wire.control_status or wire.sagemaker_status,
                            headers={REQUEST_ID: request_id, ERROR_TYPE: code}, media_type=AMZ_JSON)
    if dialect is Dialect.OPENAI:
        headers = {"x-request-id": request_id}
        if wire.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="pier"'
        return JSONResponse(openai_error_body(failure), wire.status, headers=headers)
    return JSONResponse({"message": failure.message}, wire.sagemaker_status,
                        headers={REQUEST_ID: request_id, ERROR_TYPE: wire.sagemaker_code})
