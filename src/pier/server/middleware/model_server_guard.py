"""The model server's guard (`pier container`, and each copy the gateway runs).

- A standalone container keeps SageMaker's contract: no authentication (SageMaker's network isolates it), unless
  API_KEY is set, which, as in TGI, requires `Authorization: Bearer <API_KEY>` everywhere but /ping and
  /health (401 otherwise).
- A copy started by a gateway has PIER_COPY_SECRET: it answers only requests carrying that secret in
  X-Pier-Copy-Secret (403 otherwise), except /ping (its supervisor's health check). /metrics needs the secret
  too: its counters name the copy's models and traffic, and the gateway's scrape sends it (gateway/copy_metrics.py).
Errors take the shape of the route's dialect (OpenAI, TGI, or SageMaker's toolkit).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from pier.channel.copy_secret import COPY_SECRET_ENV
from pier.channel.headers import COPY_SECRET_HEADER
from pier.dialect import Dialect
from pier.error_bodies import ErrorAnswer, openai_answer, tgi_answer, toolkit_answer
from pier.security.bearer import bearer_token
from pier.security.credentials import same_secret
from pier.server.errors import request_dialect

log = logging.getLogger("pier.server")

API_KEY_ENV = "API_KEY"  # TGI's variable
OPEN_WITH_API_KEY = frozenset({"/ping", "/health"})
OPEN_WITH_COPY_SECRET = frozenset({"/ping"})


def guard_model_server(app: FastAPI, env: Mapping[str, str]) -> None:
    """Install the guard the environment asks for, if any."""
    copy_secret, api_key = env.get(COPY_SECRET_ENV), env.get(API_KEY_ENV)
    if copy_secret and api_key:
        log.warning("API_KEY is ignored: this copy answers only the gateway that started it (PIER_COPY_SECRET); "
                    "clients authenticate to the gateway.")
    if copy_secret:
        app.add_middleware(ModelServerGuard, secret=copy_secret, bearer=False)
    elif api_key:
        app.add_middleware(ModelServerGuard, secret=api_key, bearer=True)


class ModelServerGuard:
    def __init__(self, app: ASGIApp, *, secret: str, bearer: bool) -> None:
        self.app = app
        self.secret = secret
        self.bearer = bearer
        self.open_paths = OPEN_WITH_API_KEY if bearer else OPEN_WITH_COPY_SECRET

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths or self._admitted(Headers(scope=scope)):
            await self.app(scope, receive, send)
            return
        await self._refusal(scope)(scope, receive, send)

    def _admitted(self, headers: Headers) -> bool:
        given = bearer_token(headers.get("authorization")) if self.bearer else headers.get(COPY_SECRET_HEADER)
        return given is not None and same_secret(given, self.secret)

    def _refusal(self, scope: Scope) -> Response:
        dialect = request_dialect(HTTPConnection(scope))
        if self.bearer:
            message = "Unauthorized: send `Authorization: Bearer <key>` with the key this server was given in API_KEY."
            answer = _answer(dialect, 401, message, "invalid_api_key")
            return answer.with_headers({"WWW-Authenticate": "Bearer"}).response()
        message = "Forbidden: this copy answers only the pier gateway that started it; call the gateway's endpoint."
        return _answer(dialect, 403, message, "forbidden").response()


def _answer(dialect: Dialect, status: int, message: str, code: str) -> ErrorAnswer:
    kind = "Unauthorized" if status == 401 else "Forbidden"
    if dialect is Dialect.OPENAI:
        return openai_answer(status, message, code=code)
    if dialect is Dialect.TGI:
        return tgi_answer(status, message, kind.lower())
    return toolkit_answer(status, kind, message)
