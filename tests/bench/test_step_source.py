"""Where `pier bench` reads a target's engine step times: a pier model server's own /metrics, a gateway's for the
endpoint's copies only, and nothing from a server without them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from pier.bench.options import Api
from pier.bench.step_source import StepSource, components_of
from pier.bench.subject import Subject
from tests.bench.test_engine_steps import GATEWAY_TEXT
from tests.server.conftest import app_client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


COPIES = [
    {"copy_id": "c1", "component": "chat/AllTraffic", "instance": "chat/AllTraffic#0", "state": "Ready"},
    {"copy_id": "c2", "component": "chat/AllTraffic", "instance": "chat/AllTraffic#1", "state": "Ready"},
    {"copy_id": "c3", "component": "other/AllTraffic", "instance": "other/AllTraffic#0", "state": "Ready"},
    {"copy_id": "c4", "component": "qwen-ic", "instance": "other/AllTraffic#0", "state": "Ready"},
    {"copy_id": "c5", "component": "orphan", "instance": None, "state": "Stopped"},
]


@pytest.mark.parametrize(("name", "expected"), [
    ("chat", {"chat/AllTraffic"}),  # an endpoint: its instances' copies
    ("other", {"other/AllTraffic", "qwen-ic"}),  # an endpoint hosting an inference component too
    ("qwen-ic", {"qwen-ic"}),  # the component itself (OpenAI routes name it as the model)
    ("cha", set()),  # a prefix of a name is not the name
    ("nobody", set()),
])
def test_components_of_an_endpoint_or_a_component(name: str, expected: set[str]) -> None:
    assert components_of(COPIES, name) == expected


def gateway_app() -> Starlette:
    async def copies(request: Request) -> Response:
        return JSONResponse({"copies": COPIES})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(GATEWAY_TEXT)

    return Starlette(routes=[Route("/pier/copies", copies), Route("/metrics", metrics)])


def target(url: str, base: str) -> Subject:
    return Subject("t", url, Api.SAGEMAKER, base)


@pytest.mark.anyio
@pytest.mark.parametrize(("url", "model", "decode_steps"), [
    ("http://gw/endpoints/chat/invocations-response-stream", None, 9),  # chat's two copies: 5 + 4
    ("http://gw/v1/chat/completions", "chat", 9),  # the model names the endpoint
    ("http://gw/endpoints/other/v1/chat/completions", "x", 9),  # the path names it: c3's 9 (c4 has none)
])
async def test_a_gateway_s_steps_are_the_endpoint_s_copies(url: str, model: str | None, decode_steps: int) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway_app())) as http:
        source = await StepSource.find(http, target(url, "http://gw"), model)
        assert source is not None and source.metrics_url == "http://gw/metrics"
        decode = (await source.read())[("pier_engine_step_seconds", "decode")]
    assert decode[float("inf")] == decode_steps


@pytest.mark.anyio
async def test_an_endpoint_the_gateway_does_not_serve_has_no_source() -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway_app())) as http:
        assert await StepSource.find(http, target("http://gw/endpoints/nobody/invocations", "http://gw"), None) is None


@pytest.mark.anyio
async def test_a_pier_model_server_is_read_at_its_own_metrics() -> None:
    async with app_client() as http:
        body: dict[str, Any] = {"prompt": "hello world", "max_tokens": 3, "ignore_eos": True}
        assert (await http.post("/v1/completions", json=body)).status_code == 200
        source = await StepSource.find(http, target("http://pier/v1/completions", "http://pier"), "fake-model")
        assert source is not None and source.components is None
        assert (await source.read())[("pier_engine_step_seconds", "decode")][float("inf")] >= 1


@pytest.mark.anyio
async def test_a_server_without_step_histograms_has_no_source() -> None:
    other = Starlette(routes=[Route("/metrics", lambda request: PlainTextResponse("# TYPE x counter\nx 1\n"))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other)) as http:
        assert await StepSource.find(http, target("http://llama/v1/completions", "http://llama"), "m") is None
    bare = Starlette(routes=[])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bare)) as http:
        assert await StepSource.find(http, target("http://vllm/v1/completions", "http://vllm"), "m") is None
