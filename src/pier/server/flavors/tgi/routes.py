"""Hugging Face TGI's API: /generate, /generate_stream, /info and /health, in TGI 2.0's shapes
(tgi/requests.py says which TGI that is)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pier import __version__
from pier.error_bodies import tgi_answer
from pier.server.flavors.tgi.requests import MAX_BEST_OF, GenerateRequestBody
from pier.server.flavors.tgi.spec import GenerateSpec
from pier.server.pipeline import respond
from pier.server.server_state import State, Status

router = APIRouter(tags=["TGI"])


@router.post("/generate", response_model=None)
async def generate(body: GenerateRequestBody, http: Request, state: State) -> Response:
    return await respond(GenerateSpec(body, stream=False, full_text_default=False, as_list=False), http, state)


@router.post("/generate_stream", response_model=None)
async def generate_stream(body: GenerateRequestBody, http: Request, state: State) -> Response:
    return await respond(GenerateSpec(body, stream=True, full_text_default=False, as_list=False), http, state)


@router.get("/info")
async def info(state: State) -> dict[str, Any]:
    if state.embedder is not None:  # Text Embeddings Inference's /info
        embedder = state.embedder.embedder
        return {
            "model_id": state.embedder.name, "model_sha": None, "model_dtype": "gguf",
            "model_type": {"embedding": {"pooling": embedder.pooling}},
            "max_concurrent_requests": state.settings.max_concurrent_requests,
            "max_input_length": embedder.n_batch, "max_batch_tokens": embedder.n_batch,
            "max_batch_requests": embedder.n_seq_max, "auto_truncate": False, "version": __version__,
        }
    model = state.loaded()
    settings = state.settings
    return {
        "model_id": model.name, "model_sha": None, "model_dtype": "gguf",
        "model_device_type": model.info.device_type, "pier_devices": list(model.info.devices),
        "model_pipeline_tag": "text-generation", "max_concurrent_requests": settings.max_concurrent_requests,
        "max_best_of": MAX_BEST_OF, "max_stop_sequences": model.max_stop_sequences,
        "max_input_tokens": model.limits.max_input_tokens, "max_input_length": model.limits.max_input_tokens,
        "max_total_tokens": model.limits.max_total_tokens,
        "max_batch_total_tokens": model.engine.runner.n_ctx, "max_batch_size": settings.parallel,
        "validation_workers": 1, "max_client_batch_size": 1, "router": "pier", "version": __version__,
        "sha": None, "docker_label": None, "chat_template": model.chat.origin.as_dict(),
    }


@router.get("/health", response_model=None)
async def health(state: State) -> Response:
    if state.status is Status.READY:
        return Response(status_code=200)
    return tgi_answer(503, state.not_ready_message(), "healthcheck").response()
