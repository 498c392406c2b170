"""The gateway's own routes besides the SageMaker APIs: health, this gateway's role (`/pier`: leader or follower,
and who leads), the OpenAI model list (and one model of it), the copies the backend runs (for `pier ls`, `describe`
and `logs`) with the device each runs on, this host's GPUs, and the live summary the web console charts."""

from __future__ import annotations

import time
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import generate_latest

import pier
from pier.error_bodies import openai_answer, pier_answer
from pier.gateway import copy_metrics, metrics_summary
from pier.gateway.copy_view import copy_log, seen_copies, seen_statuses
from pier.gateway.parts import gateway_of
from pier.gpus import gpu_build_advice
from pier.security.principal import caller


async def ping(request: Request) -> Response:
    return PlainTextResponse("")


async def about(request: Request) -> Response:
    """This gateway: pier's version, where its state is kept, and whether it leads the loops or follows (and who
    leads): gateway/leadership.py."""
    gateway = gateway_of(request)
    leadership = gateway.leadership
    return JSONResponse({"version": pier.__version__, "state": "postgresql" if leadership.url else "folder",
                         **leadership.role.as_json(leadership.me)})


async def openai_models(request: Request) -> Response:
    """Every endpoint and inference component in service that the caller's key may call, by the name the OpenAI
    routes take as `model` (a key limited to some endpoints sees only those and their components)."""
    return JSONResponse({"object": "list", "data": _listed(request)})


async def openai_model(model: str, request: Request) -> Response:
    """One model of the list (the openai client's `models.retrieve`); one the caller may not call is not found,
    as OpenAI answers for a model the key has no access to, so a limited key learns nothing of the others. No name
    (`/v1/models/`) is the list, as it was when the path was redirected there."""
    if not model:
        return await openai_models(request)
    for listed in _listed(request):
        if listed["id"] == model:
            return JSONResponse(listed)
    return openai_answer(404, f"The model `{model}` does not exist or you do not have access to it. GET /v1/models "
                         "lists the endpoints and inference components in service that you may call.",
                         code="model_not_found").response()


def _listed(request: Request) -> list[dict[str, Any]]:
    state = gateway_of(request).state
    who = caller(request.state)
    models = [(e.name, e.created, e.name) for e in state.endpoints.all() if e.status == "InService"]
    models += [(c.name, c.created, c.endpoint) for c in state.components.all() if c.status == "InService"]
    return [{"id": name, "object": "model", "created": int(created), "owned_by": "pier"}
            for name, created, endpoint in models if who is None or who.may_invoke(endpoint)]


async def copies(request: Request) -> Response:
    """Every copy this gateway sees (pier's own API, for `pier ls`, `describe` and `logs`): its own while it leads,
    the leader's through the copy board while it follows (gateway/copy_view.py)."""
    seen = await seen_copies(gateway_of(request))
    return JSONResponse({"copies": [copy.as_json() for copy in seen]})


async def gpus(request: Request) -> Response:
    """This host's GPUs (pier.gpus), which copy holds each, and whether copies that want GPUs it lacks run on CPU."""
    gateway = gateway_of(request)
    pool = gateway.reconciler.gpus
    holders = {}
    for status in gateway.backend.statuses():
        spec = gateway.reconciler.spec(status.copy_id)
        for gpu in spec.gpus if spec else ():
            holders[gpu] = status.copy_id
    if pool.inventory is None:
        return JSONResponse({"count": None, "source": "backend", "gpus": [], "cpu_fallback": pool.cpu_fallback,
                             "message": "Copies run on a Ray cluster: Ray hands each copy GPUs of its node."})
    rows = [{**g.to_json(), "copy_id": holders.get(str(g.id))} for g in pool.inventory.gpus]
    return JSONResponse({**pool.inventory.to_json(), "gpus": rows, "cpu_fallback": pool.cpu_fallback,
                         "build_advice": gpu_build_advice(pool.inventory)})


async def copy_logs(copy_id: str, request: Request, lines: int = 200) -> Response:
    try:
        return PlainTextResponse(await copy_log(gateway_of(request), copy_id, lines))
    except (KeyError, ValueError) as error:
        message = error.args[0] if error.args else str(error)
        return pier_answer(404, f"{message} GET /pier/copies lists the copies.").response()


async def metrics(request: Request) -> Response:
    """Every ready copy's metrics, labelled with the copy and its component, wherever the copy runs; then the
    gateway's own AWS/SageMaker series (pier.autoscaling.recorder). A follower scrapes the leader's copies."""
    copies = await seen_statuses(gateway_of(request))
    async with httpx.AsyncClient(trust_env=False) as client:
        scraped = await copy_metrics.scrape(client, copies)
    body, content_type = copy_metrics.exposition(copies, scraped)
    body += generate_latest(gateway_of(request).autoscaling.recorder.registry)  # the AWS/SageMaker series
    return Response(body, media_type=content_type)


async def summary(request: Request) -> Response:
    """Per workload: copies by state, load, tokens and latency histograms (the console's charts; see
    gateway/metrics_summary.py)."""
    gateway = gateway_of(request)
    copies = await seen_statuses(gateway)  # a follower's: the leader's
    async with httpx.AsyncClient(trust_env=False) as client:
        scraped = await copy_metrics.scrape(client, copies)
    workloads = metrics_summary.summarize(copies, scraped)
    admission = gateway.runtime.forwarder.admission
    waiting = {name: admission.waiting(name) for name in workloads}
    owners = {c.name: c.endpoint for c in gateway.state.components.all()}
    return JSONResponse(metrics_summary.summary_json(workloads, waiting, time.time(),
                                                     metrics_summary.endpoint_of_workload(owners)))
