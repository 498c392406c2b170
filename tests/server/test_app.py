"""App-wide behaviour: routing errors, payload limit, concurrency limit and draining, in each flavor's shape."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from pier.server.app import create_app
from pier.server.middleware.body_limit import MAX_BODY_BYTES
from pier.server.server_state import ServerState
from pier.server.settings import ServerSettings
from tests.server.conftest import SlowRunner, start_engine

pytestmark = pytest.mark.anyio

CHAT = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}


def oversized(size: int = MAX_BODY_BYTES + 1) -> bytes:
    prefix = b'{"inputs": "'
    return prefix + b"a" * (size - len(prefix) - 2) + b'"}'


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/chat/completions", "openai"),
        ("/generate", "tgi"),
        ("/invocations", "tgi"),
    ],
)
async def test_body_over_6_mib_is_413(client: httpx.AsyncClient, path: str, shape: str) -> None:
    body = oversized()
    assert len(body) == 6_291_457
    response = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 413
    message = response.json()["error"]["message"] if shape == "openai" else response.json()["error"]
    assert "6291456" in message and "shorter" in message


async def test_chunked_body_over_6_mib_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(7):
            yield b"x" * (1024 * 1024)

    response = await client.post("/v1/completions", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "invalid_request_error"


async def test_body_of_exactly_6_mib_is_read(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/generate", content=oversized(MAX_BODY_BYTES), headers={"content-type": "application/json"}
    )
    assert response.status_code == 422  # read and parsed; then too many tokens for the model
    assert "`inputs` tokens + `max_new_tokens`" in response.json()["error"]


async def test_unknown_route_and_wrong_method(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/audio/speech", json={})
    wrong = await client.get("/generate")
    assert missing.status_code == 404 and "POST /v1/chat/completions" in missing.json()["error"]["message"]
    assert wrong.status_code == 405 and "GET is not allowed on /generate" in wrong.json()["error"]


async def test_over_the_concurrency_limit_is_429_at_once() -> None:
    engine = start_engine(SlowRunner(0.02, n_ctx=256, n_seq_max=8, n_batch=64))
    app = create_app(ServerSettings(max_concurrent_requests=1), engine=engine)
    state: ServerState = app.state.pier
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            first = asyncio.create_task(
                client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 20, "ignore_eos": True})
            )
            while state.admission.in_flight == 0:
                await asyncio.sleep(0.005)
            started = time.monotonic()
            refused = await client.post("/v1/chat/completions", json=CHAT)
            refused_tgi = await client.post("/generate", json={"inputs": "hello"})
            described, listed = await client.get("/info"), await client.get("/v1/models")
            elapsed = time.monotonic() - started
            assert (await first).status_code == 200
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "rate_limit_error"
        assert "MAX_CONCURRENT_REQUESTS" in refused.json()["error"]["message"]
        assert refused_tgi.status_code == 429 and refused_tgi.json()["error_type"] == "overloaded"
        assert described.status_code == 200 and listed.status_code == 200  # questions are not generation work
        assert elapsed < 0.3
        assert state.admission.in_flight == 0
    finally:
        engine.stop()


async def test_draining_refuses_new_work_and_fails_ping(app: FastAPI, client: httpx.AsyncClient) -> None:
    app.state.pier.draining = True
    ping = await client.get("/ping")
    chat = await client.post("/v1/chat/completions", json=CHAT)
    tgi = await client.post("/invocations", json={"inputs": "hello"})
    assert ping.status_code == 503 and ping.json()["status"] == "draining"
    assert chat.status_code == 503 and "shutting down" in chat.json()["error"]["message"]
    assert tgi.status_code == 503 and tgi.json()["error_type"] == "unavailable"


async def test_ping_answers_while_the_engine_is_busy() -> None:
    engine = start_engine(SlowRunner(0.05, n_ctx=256, n_seq_max=8, n_batch=64))
    app = create_app(ServerSettings(), engine=engine)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            busy = [
                asyncio.create_task(
                    client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 10, "ignore_eos": True})
                )
                for _ in range(4)
            ]
            while engine.stats().running < 4:
                await asyncio.sleep(0.005)
            started = time.monotonic()
            ping = await client.get("/ping")
            assert time.monotonic() - started < 0.05
            assert ping.status_code == 200
            assert all(r.status_code == 200 for r in await asyncio.gather(*busy))
    finally:
        engine.stop()


async def test_openapi_schema_lists_every_route(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {
        "/ping",
        "/invocations",
        "/generate",
        "/generate_stream",
        "/info",
        "/health",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
    } <= set(paths)
