"""The model server's FastAPI apps: every flavor's routes over one engine, or SageMaker's two routes
over the user's own inference.py; errors always in the request's flavor's shape."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from pier import __version__
from pier.dialect import Dialect
from pier.engine.engine import Engine
from pier.errors import CLIENT_CLOSED_REQUEST, ClientGone, PierError
from pier.model.chat import ChatTemplate
from pier.server.errors import (
    TooDeeplyNested,
    error_response,
    http_error,
    request_dialect,
    validation_error,
)
from pier.server.flavors import embeddings, sagemaker, tokenizer
from pier.server.flavors.openai import routes as openai
from pier.server.flavors.tgi import routes as tgi
from pier.server.kv_report import KvHeldHeader
from pier.server.middleware import adapter_requests
from pier.server.middleware.adapter_requests import AdapterRequests
from pier.server.middleware.body_limit import BodyLimit
from pier.server.middleware.request_timeout import RequestTimeout
from pier.server.resumable_answers import ResumableAnswers
from pier.server.served_model import ServedModel
from pier.server.server_metrics import RequestMetrics
from pier.server.server_state import InvocationHandler, ServerState
from pier.server.settings import ServerSettings

log = logging.getLogger(__name__)

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

ROUTES_HINT = (
    "This server serves GET /ping, POST /invocations, POST /generate, POST /generate_stream, GET /info, "
    "GET /health, POST /v1/chat/completions, POST /v1/completions, GET /v1/models, POST /v1/embeddings and POST "
    "/embed (embedding models), POST /tokenize, /detokenize and /apply-template, and GET /metrics."
)
HANDLER_ROUTES_HINT = (
    "This server runs the model's own code/inference.py and serves GET /ping, POST /invocations and "
    "GET /metrics."
)


def create_app(
    settings: ServerSettings | None = None, *, engine: Engine | None = None, chat: ChatTemplate | None = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """The app over a started `engine`; without one it answers 503 until `attach_model` is called."""
    app = _app(settings or ServerSettings(), lifespan, ROUTES_HINT)
    app.add_middleware(AdapterRequests)  # inside ResumableAnswers: a refusal is framed like any answer
    app.add_middleware(ResumableAnswers)  # the gateway may resume these requests on another copy
    app.add_middleware(KvHeldHeader)  # outside ResumableAnswers: on the outer answer, where the gateway reads it
    app.add_middleware(RequestTimeout)  # outermost: the gateway's limit for an asynchronous request
    if engine is not None:
        attach_model(app, engine, chat)
    app.include_router(sagemaker.llm_router)
    app.include_router(tgi.router)
    app.include_router(openai.router)
    app.include_router(embeddings.router)
    app.include_router(tokenizer.router)
    app.include_router(adapter_requests.router)
    return app


def create_handler_app(
    settings: ServerSettings | None = None, *, handler: InvocationHandler, lifespan: Lifespan | None = None
) -> FastAPI:
    """The app over the user's inference.py: /ping follows the handler's readiness, /invocations runs it.
    The LLM routes are not served: what the handler takes and answers is the user's to define."""
    app = _app(settings or ServerSettings(), lifespan, HANDLER_ROUTES_HINT)
    app.state.pier.handler = handler
    app.state.dialect = Dialect.SAGEMAKER
    app.include_router(sagemaker.handler_router)
    return app


def _app(settings: ServerSettings, lifespan: Lifespan | None, hint: str) -> FastAPI:
    state = ServerState(settings)
    app = FastAPI(title="pier model server", version=__version__, lifespan=lifespan)
    app.state.pier = state
    app.include_router(sagemaker.router)
    app.add_api_route("/metrics", _metrics, methods=["GET"], include_in_schema=False)
    install_error_handlers(app, hint=hint)
    app.add_middleware(BodyLimit)
    app.add_middleware(RequestMetrics, metrics=state.metrics)
    return app


def attach_model(app: FastAPI, engine: Engine, chat: ChatTemplate | None = None) -> ServedModel:
    """The model is loaded: start serving it."""
    state: ServerState = app.state.pier
    state.model = ServedModel(engine, state.settings, state.metrics, chat)
    return state.model


async def _metrics(request: Request) -> Response:
    body, content_type = request.app.state.pier.metrics.exposition()
    return Response(body, media_type=content_type)


def install_error_handlers(app: FastAPI, *, hint: str) -> None:
    """Every error, whoever raises it, leaves in the shape of the request's flavor."""

    async def pier_error(request: Request, error: Exception) -> Response:
        return error_response(error, request_dialect(request))

    async def bad_body(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        return validation_error(error.errors(), request_dialect(request))

    async def http_exception(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if isinstance(error.__cause__, RecursionError):  # FastAPI's "error parsing the body", from json.loads
            return error_response(TooDeeplyNested(), request_dialect(request))
        detail = str(error.detail)
        if error.status_code == 404:
            detail = f"No route {request.method} {request.url.path}. {hint}"
        elif error.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}. {hint}"
        response = http_error(error.status_code, detail, request_dialect(request))
        response.headers.update(error.headers or {})  # a 405's Allow
        return response

    async def client_gone(request: Request, error: Exception) -> Response:
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(error, request_dialect(request))

    app.add_exception_handler(PierError, pier_error)
    app.add_exception_handler(RequestValidationError, bad_body)
    app.add_exception_handler(HTTPException, http_exception)
    app.add_exception_handler(ClientGone, client_gone)
    app.add_exception_handler(Exception, unexpected)
