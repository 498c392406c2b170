"""`GET /pier/adapters`: every adapter inference component, the memory its tensors take on each copy that
loaded it (llama.cpp keeps one set of A and B tensors per adapter beside the shared base weights), and which of its
base's copies have loaded it so far (copies load an adapter on its first request)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse, Response

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from pier.control import adapters
from pier.control.workload import Workload
from pier.gateway.copy_metrics import SCRAPE_TIMEOUT_S
from pier.gateway.copy_view import seen_statuses
from pier.gateway.parts import gateway_of
from pier.lora_file import tensor_bytes


async def adapter_list(request: Request) -> Response:
    gateway = gateway_of(request)
    records = [c for c in gateway.state.components.all() if adapters.is_adapter(c)]
    bases = {adapters.base_name(r).lower() for r in records}
    seen = await seen_statuses(gateway)  # a follower's: the leader's
    copies = [c for base in bases for c in seen
              if c.component == Workload.of_component(base) and c.state is CopyState.READY and c.url]
    async with httpx.AsyncClient(trust_env=False) as client:
        loaded = await _loaded(client, copies)
    rows = []
    for record in records:
        row: dict[str, Any] = {"InferenceComponentName": record.name, "EndpointName": record.endpoint,
                               "BaseInferenceComponentName": adapters.base_name(record),
                               "InferenceComponentStatus": record.status, "MemoryBytes": None, "LoadedOn": []}
        if record.model_dir is not None:
            with contextlib.suppress(ValueError):  # Describe says why it failed
                row["MemoryBytes"] = tensor_bytes(adapters.adapter_file(record.model_dir))[0]
        row["LoadedOn"] = sorted(copy_id for copy_id, names in loaded.items() if record.name in names)
        rows.append(row)
    return JSONResponse({"adapters": rows})


async def _loaded(client: httpx.AsyncClient, copies: list[CopyStatus]) -> dict[str, set[str]]:
    """Each copy's loaded adapters, by copy id; a copy that does not answer in time is left out."""
    async def one(copy: CopyStatus) -> tuple[str, set[str]] | None:
        assert copy.url is not None
        headers = copy_secret_header(copy.secret)
        try:
            answer = await client.get(copy.url.rstrip("/") + "/pier/adapters", headers=headers,
                                      timeout=SCRAPE_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        if answer.status_code != 200:
            return None
        return copy.copy_id, {a["name"] for a in answer.json().get("adapters", [])}

    found = await asyncio.gather(*(one(c) for c in copies))
    return dict(f for f in found if f is not None)
