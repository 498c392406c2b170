"""The name an OpenAI answer gives its model: the one the client asked for.

A copy echoes the request's `model` (as llama-server does); a request that names none gets the name the gateway
tells the copy in MODEL_NAME_HEADER (the inference component, or the endpoint, the call was routed to), and
only then the copy's own (PIER_MODEL_NAME, HF_MODEL_ID or the GGUF's). The same header names the one model a
copy's GET /v1/models lists when the gateway asks for it under an endpoint's path. The header comes only from
the gateway in practice (copies answer only their gateway); anyone else who sets it renames only their own answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from pier.channel.headers import MODEL_NAME_HEADER


def answered_name(requested: str | None, headers: Mapping[str, str], own: str) -> str:
    """What `model` an answer carries: the request's, else the gateway's name for the target, else the copy's."""
    return requested or headers.get(MODEL_NAME_HEADER) or own


def listed_name(headers: Mapping[str, str], own: str) -> str:
    """The name GET /v1/models gives the copy's model: the gateway's for its target, else the copy's own."""
    return headers.get(MODEL_NAME_HEADER) or own
