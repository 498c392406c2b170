"""The gateway's own routes besides the SageMaker APIs: health, the OpenAI model list, and the copies the
backend runs (for `pier ls`, `describe` and `logs`)."""

from __future__ import annotations

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import generate_latest

from pier.gateway import copy_metrics
from pier.gateway.parts import gateway_of


async def ping(request: Request) -> Response:
    return PlainTextResponse("")


async def openai_models(request: Request) -> Response:
    """Every endpoint and inference component in service, by the name the OpenAI routes take as `model`."""
    state = gateway_of(request).state
    models = [(e.name, e.created) for e in state.endpoints.all() if e.status == "InService"]
    models += [(c.name, c.created) for c in state.components.all() if c.status == "InService"]
    data = [{"id": name, "object": "model", "created": int(created), "owned_by": "pier"} for name, created in models]
    return JSONResponse({"object": "list", "data": data})


async def copies(request: Request) -> Response:
    """Every copy the backend runs (pier's own API, for `pier ls`, `describe` and `logs`)."""
    statuses = gateway_of(request).backend.statuses()
    rows = [{"copy_id": c.copy_id, "component": c.component, "state": c.state.value, "url": c.url,
             "message": c.message, "restarts": c.restarts, "pid": c.pid, "concurrency": c.concurrency}
            for c in statuses]
    return JSONResponse({"copies": rows})


async def copy_logs(copy_id: str, request: Request, lines: int = 200) -> Response:
    try:
        return PlainTextResponse(gateway_of(request).backend.logs(copy_id, lines))
    except (KeyError, ValueError) as error:
        message = error.args[0] if error.args else str(error)
        return JSONResponse({"message": f"{message} GET /pier/copies lists the copies."}, 404)


async def metrics(request: Request) -> Response:
    """Every ready copy's metrics, labelled with the copy and its component, wherever the copy runs; then the
    gateway's own AWS/SageMaker series (pier.autoscaling.recorder)."""
    copies = gateway_of(request).backend.statuses()
    async with httpx.AsyncClient(trust_env=False) as client:
        scraped = await copy_metrics.scrape(client, copies)
    body, content_type = copy_metrics.exposition(copies, scraped)
    body += generate_latest(gateway_of(request).autoscaling.recorder.registry)  # the AWS/SageMaker series
    return Response(body, media_type=content_type)
