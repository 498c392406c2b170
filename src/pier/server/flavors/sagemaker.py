"""SageMaker's container contract: GET /ping and POST /invocations.

Serving a model on pier's engine, /invocations takes what the Hugging Face LLM container takes, told
apart by shape: a TGI generate payload (`inputs`), a chat payload (`messages`, TGI's Messages API, answered
in TGI's shapes as that container answers it) or a completion payload (`prompt`, answered as OpenAI does);
`"stream": true` answers with server-sent events.
Serving the user's own code/inference.py, /invocations passes the raw body to it, as SageMaker's
inference toolkit does.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError

from pier.dialect import Dialect
from pier.errors import InvalidRequest
from pier.server.errors import TooDeeplyNested
from pier.server.flavors import embeddings
from pier.server.flavors.openai.requests import ChatCompletionRequest, CompletionRequest
from pier.server.flavors.openai.spec import CompletionSpec
from pier.server.flavors.tgi.messages import messages_spec
from pier.server.flavors.tgi.requests import GenerateRequestBody
from pier.server.flavors.tgi.spec import GenerateSpec
from pier.server.kernel_choice import ready_headers
from pier.server.pipeline import respond
from pier.server.server_state import State, Status

router = APIRouter(tags=["SageMaker"])  # both modes
llm_router = APIRouter(tags=["SageMaker"])
handler_router = APIRouter(tags=["SageMaker"])
M = TypeVar("M", bound=BaseModel)
CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


def _schema_ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


INVOCATIONS_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"anyOf": [
            _schema_ref(GenerateRequestBody), _schema_ref(ChatCompletionRequest), _schema_ref(CompletionRequest),
        ]}}},
    }
}


@router.get("/ping", response_model=None)
async def ping(state: State) -> Response:
    """200 once the model is loaded; 503 while loading, draining or failed. Never waits on inference."""
    status = state.status
    if status is Status.READY:
        return JSONResponse({"status": status.value}, headers=ready_headers(state.concurrency))
    return JSONResponse({"status": status.value, "message": state.not_ready_message()}, status_code=503)


@router.get("/execution-parameters")
async def execution_parameters(state: State) -> dict[str, Any]:
    """What SageMaker batch transform asks a container before sending it records."""
    return {
        "MaxConcurrentTransforms": state.settings.max_concurrent_requests, "BatchStrategy": "SINGLE_RECORD",
        "MaxPayloadInMB": 6,
    }


@llm_router.post("/invocations", response_model=None, openapi_extra=INVOCATIONS_BODY)
async def invocations(http: Request, state: State) -> Response:
    payload = await _json_object(http)
    if state.embedder is not None and embeddings.is_embed_payload(payload):  # SageMaker's TEI container's shape
        embed = _parse(embeddings.EmbedRequest, payload, http, embeddings.EMBED_FLAVOR)
        return JSONResponse(await embeddings.respond_embed(embed, state))
    if "inputs" in payload:
        body = _parse(GenerateRequestBody, payload, http, Dialect.TGI)
        spec = GenerateSpec(body, stream=body.stream, full_text_default=True, as_list=not body.stream)
        return await respond(spec, http, state)
    if "messages" in payload:  # TGI's Messages API, in TGI's shapes (errors included)
        chat = _parse(ChatCompletionRequest, payload, http, Dialect.TGI)
        return await respond(messages_spec(chat), http, state)
    if "prompt" in payload:
        completion = _parse(CompletionRequest, payload, http, Dialect.OPENAI)
        return await respond(CompletionSpec(completion), http, state)
    raise InvalidRequest(
        "Unrecognized /invocations payload: send a TGI request {\"inputs\": \"...\", \"parameters\": {...}}, "
        "a chat request {\"messages\": [...]} or a completion request {\"prompt\": \"...\"}.",
    )


@handler_router.post("/invocations", response_model=None)
async def handler_invocations(http: Request, state: State) -> Response:
    """The raw body through the user's input_fn / predict_fn / output_fn; their errors keep their status."""
    handler, ticket = state.admit_invocation()
    with ticket:
        body, content_type = await handler.invoke(
            await http.body(), http.headers.get("content-type", ""), http.headers.get("accept", ""),
            http.headers.get(CUSTOM_ATTRIBUTES),
        )
    return Response(body, media_type=content_type)


async def _json_object(http: Request) -> dict[str, Any]:
    # Read whatever the Content-Type says: SageMaker clients often send JSON as text/plain or octet-stream.
    raw = await http.body()
    try:
        payload = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"The request body is not valid JSON ({error}); send a JSON object.") from None
    except RecursionError:
        raise TooDeeplyNested() from None
    if not isinstance(payload, dict):
        raise InvalidRequest(f"The request body must be a JSON object, not {type(payload).__name__}.")
    return payload


def _parse(model: type[M], payload: dict[str, Any], http: Request, dialect: Dialect) -> M:
    """Validate as `model`; from here on this request's errors take `dialect`'s shape."""
    http.state.dialect = dialect
    try:
        return model.model_validate(payload)
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_url=False)) from None
