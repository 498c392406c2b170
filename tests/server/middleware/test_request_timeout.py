"""The gateway's per-request limit on a copy (X-Pier-Timeout-Seconds), in place of SAGEMAKER_MODEL_SERVER_TIMEOUT."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from pier.server.middleware import request_timeout
from pier.server.middleware.request_timeout import HEADER, RequestTimeout


@pytest.mark.parametrize(("value", "seconds"), [(b"900", 900.0), (b"1.5", 1.5), (b"0", None), (b"-3", None),
                                                (b"soon", None)])
def test_parse(value: bytes, seconds: float | None) -> None:
    assert request_timeout.parse(value) == seconds


async def limit(_: Request) -> PlainTextResponse:
    return PlainTextResponse(str(request_timeout.deadline_s(58.0)))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_request_runs_under_the_gateways_limit_when_it_sets_one() -> None:
    app = RequestTimeout(Starlette(routes=[Route("/", limit)]))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://copy") as client:
        assert (await client.get("/", headers={HEADER: "900"})).text == "900.0"
        assert (await client.get("/")).text == "58.0"  # the copy's own limit, not the last request's
        assert (await client.get("/", headers={HEADER: "nonsense"})).text == "58.0"
