"""What the gateway's router answers for a path or method it does not serve. Under the OpenAI paths the answer
takes OpenAI's shape, as OpenAI answers an unknown URL, because the openai client reads an error only from
`{"error": {...}}` (FastAPI's `{"detail": "Not Found"}` reaches its user as a bare "Error code: 404"). Other paths
keep Starlette's answer."""

from __future__ import annotations

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from pier.dialect import Dialect, dialect_of
from pier.error_bodies import openai_answer

OPENAI_ROUTES = (
    "The gateway serves POST /v1/chat/completions, POST /v1/completions, POST /v1/responses, POST /v1/embeddings, "
    "GET /v1/models and GET /v1/models/MODEL (also under /endpoints/ENDPOINT/v1/ and SageMaker's "
    "/endpoints/ENDPOINT/openai/v1/)."
)


async def router_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    path = request.scope["path"]
    if dialect_of(path) is not Dialect.OPENAI:
        return await http_exception_handler(request, error)
    if error.status_code == 404:
        message = f"Invalid URL ({request.method} {path}). {OPENAI_ROUTES}"
    elif error.status_code == 405:
        message = f"Invalid method for URL ({request.method} {path}). {OPENAI_ROUTES}"
    else:
        message = str(error.detail)
    answer = openai_answer(error.status_code, message)
    return answer.with_headers(error.headers or {}).response()  # a 405's Allow
