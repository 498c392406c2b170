"""The OpenAI API's routes: /v1/chat/completions, /v1/completions and /v1/responses (with SSE streaming),
/v1/models and /v1/models/{model}."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pier.channel.headers import MODEL_NAME_HEADER
from pier.errors import ResponseNotStored
from pier.served_name import listed_name
from pier.server.errors import ModelNotServed
from pier.server.flavors.openai.requests import ChatCompletionRequest, CompletionRequest
from pier.server.flavors.openai.response_request import ResponseRequest
from pier.server.flavors.openai.spec import ChatSpec, CompletionSpec, ResponseSpec
from pier.server.pipeline import respond
from pier.server.server_state import State

router = APIRouter(tags=["OpenAI"])


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionRequest, http: Request, state: State) -> Response:
    body.model = body.model or http.headers.get(MODEL_NAME_HEADER)  # the name answers carry (pier.served_name)
    return await respond(ChatSpec(body), http, state)


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, http: Request, state: State) -> Response:
    body.model = body.model or http.headers.get(MODEL_NAME_HEADER)
    return await respond(CompletionSpec(body), http, state)


@router.post("/v1/responses", response_model=None)
async def responses(body: ResponseRequest, http: Request, state: State) -> Response:
    body.model = body.model or http.headers.get(MODEL_NAME_HEADER)
    return await respond(ResponseSpec(body), http, state)


@router.get("/v1/responses/{response_id}", response_model=None)
async def stored_response(response_id: str) -> Response:
    raise ResponseNotStored(response_id)


@router.delete("/v1/responses/{response_id}", response_model=None)
async def delete_stored_response(response_id: str) -> Response:
    raise ResponseNotStored(response_id)


@router.get("/v1/models")
async def models(http: Request, state: State) -> dict[str, Any]:
    return {"object": "list", "data": [_listed(http, state)]}


@router.get("/v1/models/{model:path}")
async def model(model: str, http: Request, state: State) -> dict[str, Any]:
    """The openai client's `models.retrieve`: the one model served, by the name /v1/models lists (no name, as
    `/v1/models/`, is the list)."""
    if not model:
        return await models(http, state)
    listed = _listed(http, state)
    if listed["id"] != model:
        raise ModelNotServed(model, listed["id"])
    return listed


def _listed(http: Request, state: State) -> dict[str, Any]:
    name, created, max_len = state.listed()
    return {"id": listed_name(http.headers, name), "object": "model", "created": created, "owned_by": "pier",
            "max_model_len": max_len}
