"""The runtime's HTTP routes, for the gateway app to mount:

    service = RuntimeService(resolve)         # resolve(endpoint, component, variant) -> Target | [CopyStatus]
    app.include_router(runtime_api(service))  # SageMaker runtime
    app.include_router(openai_api(service))   # optional: OpenAI passthrough
    ...
    await service.aclose()                    # on shutdown

Each route answers every error itself, in its API's shape: no exception handlers are needed.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from fastapi import APIRouter, Request
from starlette.responses import Response

from pier.dialect import Dialect
from pier.error_bodies import render
from pier.errors import ResponseNotStored
from pier.runtime.errors import sagemaker_error
from pier.runtime.invocation import Invocation
from pier.runtime.invoke import RuntimeService
from pier.runtime.openai import RESPONSES

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
EMBEDDINGS = "/v1/embeddings"
MODELS = "/v1/models"
# llama-server's tokenizer routes (pier.server.flavors.tokenizer), under an endpoint's paths only: they name no
# model in the body, so the path says which copy's tokenizer answers.
TOKENIZER = ("/tokenize", "/detokenize", "/apply-template")


def runtime_api(service: RuntimeService) -> APIRouter:
    """POST /endpoints/{EndpointName}/invocations and /endpoints/{EndpointName}/invocations-response-stream."""
    router = APIRouter(tags=["SageMaker runtime"])

    @router.post("/endpoints/{endpoint_name}/invocations", response_model=None)
    async def invoke_endpoint(endpoint_name: str, request: Request) -> Response:
        invocation = await _invocation(service, endpoint_name, request, stream=False)
        if isinstance(invocation, Response):
            return invocation
        return await service.invoke(invocation, request.receive)

    @router.post("/endpoints/{endpoint_name}/invocations-response-stream", response_model=None)
    async def invoke_endpoint_with_response_stream(endpoint_name: str, request: Request) -> Response:
        invocation = await _invocation(service, endpoint_name, request, stream=True)
        if isinstance(invocation, Response):
            return invocation
        return await service.invoke_stream(invocation, request.receive)

    return router


async def _invocation(service: RuntimeService, endpoint: str, request: Request, *, stream: bool
                      ) -> Invocation | Response:
    request_id = str(uuid.uuid4())
    try:
        return await Invocation.from_request(
            endpoint, request, stream=stream, limit=service.settings.max_payload_bytes, request_id=request_id)
    except Exception as error:
        return sagemaker_error(error, request_id)


def openai_api(service: RuntimeService) -> APIRouter:
    """/v1/chat/completions, /v1/completions, /v1/responses and /v1/embeddings, the endpoint named by the body's `model`
    ("ENDPOINT" or "ENDPOINT/INFERENCE_COMPONENT"), and the same under /endpoints/{EndpointName}/v1/,
    where `model` is free (an OpenAI client's base_url then names the endpoint); and SageMaker's own
    OpenAI-compatible paths, /endpoints/{EndpointName}/openai/v1/ and
    /endpoints/{EndpointName}/inference-components/{InferenceComponentName}/openai/v1/. Under an endpoint's
    paths, GET /v1/models is the copy's own list (named as the endpoint or component), and GET /v1/models/{model}
    the copy's own answer. llama-server's /tokenize,
    /detokenize and /apply-template are forwarded under the same endpoint paths (not under /v1/)."""
    router = APIRouter(tags=["OpenAI"])
    routes = [(CHAT, "POST"), (COMPLETIONS, "POST"), (RESPONSES, "POST"), (EMBEDDINGS, "POST"), (MODELS, "GET")]
    for path, method in [*routes, *((path, "POST") for path in TOKENIZER)]:
        if method == "POST" and path not in TOKENIZER:  # GET /v1/models lists every endpoint (the gateway's own)
            router.add_api_route(path, _by_model(service, path), methods=[method], response_model=None)
        router.add_api_route("/endpoints/{endpoint_name}" + path, _by_endpoint(service, path), methods=[method],
                             response_model=None)
        router.add_api_route("/endpoints/{endpoint_name}/openai" + path, _sagemaker_path(service, path),
                             methods=[method], response_model=None)
        router.add_api_route("/endpoints/{endpoint_name}/inference-components/{component_name}/openai" + path,
                             _sagemaker_component_path(service, path), methods=[method], response_model=None)
    for prefix, sagemaker_path in (("/endpoints/{endpoint_name}", False), ("/endpoints/{endpoint_name}/openai", True),
                                   ("/endpoints/{endpoint_name}/inference-components/{component_name}/openai", True)):
        router.add_api_route(prefix + MODELS + "/{model_id:path}", _model(service, sagemaker_path), methods=["GET"],
                             response_model=None)
    # A stored response, asked for by id: the gateway answers, since no copy keeps one (nor could be chosen: the
    # request names no model).
    for prefix in ("", "/endpoints/{endpoint_name}", "/endpoints/{endpoint_name}/openai",
                   "/endpoints/{endpoint_name}/inference-components/{component_name}/openai"):
        for method in ("GET", "DELETE"):  # one route each: one OpenAPI operation id each
            router.add_api_route(prefix + RESPONSES + "/{response_id}", _not_stored, methods=[method],
                                 response_model=None, name=f"{method.lower()}_stored_response")
    return router


async def _not_stored(response_id: str) -> Response:
    return render(ResponseNotStored(response_id), Dialect.OPENAI, str(uuid.uuid4())).response()


def _model(service: RuntimeService, sagemaker_path: bool) -> Callable[[Request], Awaitable[Response]]:
    """GET /v1/models/{model} under an endpoint's paths (the openai client's `models.retrieve`): the copy's own
    answer, as for its list, so a model is found by the name the list gives it."""
    async def route(request: Request) -> Response:
        named = request.path_params
        path = f"{MODELS}/{quote(named['model_id'])}" if named["model_id"] else MODELS  # `/v1/models/`: the list
        return await service.openai(request, path, named["endpoint_name"],
                                    sagemaker_path=sagemaker_path, component=named.get("component_name"))

    return route


def _by_model(service: RuntimeService, path: str) -> Callable[[Request], Awaitable[Response]]:
    async def route(request: Request) -> Response:
        return await service.openai(request, path)

    return route


def _by_endpoint(service: RuntimeService, path: str) -> Callable[[str, Request], Awaitable[Response]]:
    async def route(endpoint_name: str, request: Request) -> Response:
        return await service.openai(request, path, endpoint_name)

    return route


def _sagemaker_path(service: RuntimeService, path: str) -> Callable[[str, Request], Awaitable[Response]]:
    async def route(endpoint_name: str, request: Request) -> Response:
        return await service.openai(request, path, endpoint_name, sagemaker_path=True)

    return route


def _sagemaker_component_path(service: RuntimeService, path: str
                              ) -> Callable[[str, str, Request], Awaitable[Response]]:
    async def route(endpoint_name: str, component_name: str, request: Request) -> Response:
        return await service.openai(request, path, endpoint_name, sagemaker_path=True, component=component_name)

    return route
