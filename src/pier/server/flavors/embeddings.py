"""Embeddings in OpenAI's shape (POST /v1/embeddings) and Text Embeddings Inference's (POST /embed, and
/invocations with `{"inputs": ...}` on an embedding model, as SageMaker's TEI container takes it).

Vectors are unit length unless TEI's `normalize` is false (OpenAI's are always normalized); `encoding_format`
"base64" is the float32 little-endian bytes, as OpenAI sends them (the openai client asks for it by default).
`dimensions` is refused unless it is the model's own: a llama.cpp embedding model has one size.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from pier.dialect import Dialect
from pier.errors import InvalidRequest
from pier.served_name import answered_name
from pier.server.served_embedder import ServedEmbedder
from pier.server.server_state import State

router = APIRouter(tags=["Embeddings"])


class EmbeddingRequest(BaseModel):
    """OpenAI's embeddings request."""

    model_config = ConfigDict(extra="ignore")

    input: str | list[str] | list[int] | list[list[int]]
    model: str | None = None
    encoding_format: Literal["float", "base64"] | None = "float"  # null: float, as OpenAI reads it
    dimensions: int | None = None
    user: str | None = None


class EmbedRequest(BaseModel):
    """Text Embeddings Inference's /embed request (SageMaker's TEI container's /invocations)."""

    model_config = ConfigDict(extra="ignore")

    inputs: str | list[str]
    normalize: bool = True
    truncate: bool = False


@router.post("/v1/embeddings")
async def embeddings(body: EmbeddingRequest, http: Request, state: State) -> dict[str, Any]:
    served, ticket = state.admit_embedding()
    with ticket:
        if body.dimensions is not None and body.dimensions != served.embedder.n_embd:
            raise InvalidRequest(
                f"Model {served.name} gives embeddings of {served.embedder.n_embd} dimensions and cannot shorten them: "
                f"leave out `dimensions` (or set it to {served.embedder.n_embd}).", param="dimensions")
        inputs = await _openai_inputs(served, body.input)
        vectors = await served.embed(inputs)
    tokens = sum(len(i) for i in inputs)
    return {
        "object": "list", "model": answered_name(body.model, http.headers, served.name),  # pier.served_name
        "data": [{"object": "embedding", "index": index, "embedding": _encoded(vector, body.encoding_format)}
                 for index, vector in enumerate(vectors)],
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@router.post("/embed")
async def embed(body: EmbedRequest, state: State) -> list[list[float]]:
    return await respond_embed(body, state)


async def respond_embed(body: EmbedRequest, state: State) -> list[list[float]]:
    served, ticket = state.admit_embedding()
    with ticket:
        texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
        if not texts:
            raise InvalidRequest("`inputs` is an empty list: send a string or a list of strings to embed.")
        inputs = await served.tokenize(texts)
        if body.truncate:
            inputs = [tokens[: served.embedder.n_batch] for tokens in inputs]
        vectors = await served.embed(inputs, normalize=body.normalize)
    return [vector.tolist() for vector in vectors]


def is_embed_payload(payload: dict[str, Any]) -> bool:
    return "inputs" in payload


EMBED_FLAVOR = Dialect.TGI  # TEI answers errors as TGI does: {"error": ..., "error_type": ...}


async def _openai_inputs(served: ServedEmbedder, given: str | list[str] | list[int] | list[list[int]]
                         ) -> list[list[int]]:
    if isinstance(given, str):
        return await served.tokenize([given])
    if not given:
        raise InvalidRequest("`input` is an empty list: send a string, a list of strings, or token ids.",
                             param="input")
    if all(isinstance(item, str) for item in given):
        return await served.tokenize([str(item) for item in given])
    ids = [item for item in given if isinstance(item, int)]
    if len(ids) == len(given):
        return [ids]  # one input as token ids
    return [list(item) for item in given if isinstance(item, list)]


def _encoded(vector: np.ndarray, encoding: str | None) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector]
