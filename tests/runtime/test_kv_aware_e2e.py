"""KV_AWARE on real processes: a gateway that restarted (its own memory of prefixes lost) sends a conversation's
next turn to the copy whose prefix cache still holds its history, as that copy's answers say (X-Pier-Kv-Held)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from pier.runtime.errors import EndpointNotFound
from pier.runtime.http_api import runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.routing_strategy import Routing, Strategy
from pier.runtime.target import Target
from tests.backends.conftest import Running, backend_running, spec
from tests.runtime.test_data_plane_e2e import invocations_served
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

COPIES = ["llm-1", "llm-2"]
HISTORY = "You are a terse assistant. " * 6 + "User: tell me about cats and their whiskers. "  # > 2 text blocks
SHORT = {"inputs": "hi", "parameters": {"max_new_tokens": 2}}  # under one block: it says nothing of prefixes


@pytest.fixture(scope="module")
def running(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with backend_running(tmp_path_factory.mktemp("state")) as running:
        for index, copy_id in enumerate(COPIES):
            running.loop.run(running.backend.start(spec(copy_id, model_dir, index)))
        running.wait_ready(*COPIES)
        yield running


@contextmanager
def gateway(running: Running) -> Iterator[str]:
    """A gateway process's runtime, fresh: its copy chooser remembers nothing."""

    def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
        if endpoint != "llm":
            raise EndpointNotFound(endpoint, "000000000000")
        target = Target.of(endpoint, running.backend.statuses())
        return Target(target.copies, target.component, target.variant, Routing(Strategy.KV_AWARE))

    service = RuntimeService(resolve)
    app = FastAPI()
    app.include_router(runtime_api(service))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                           lifespan="off"))
    serving = asyncio.run_coroutine_threadsafe(server.serve(), running.loop.loop)
    running.wait_for(lambda: server.started, 10, "the gateway to listen")
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        serving.result(15)
        running.loop.run(service.aclose())


def served(running: Running) -> dict[str, float]:
    return {copy_id: invocations_served(running.status(copy_id)) for copy_id in COPIES}


def invoke(url: str, payload: dict[str, object], running: Running) -> str:
    """Which copy answered `payload`."""
    before = served(running)
    answer = httpx.post(f"{url}/endpoints/llm/invocations", json=payload, timeout=60)
    assert answer.status_code == 200, answer.text
    after = served(running)
    return next(copy_id for copy_id in COPIES if after[copy_id] > before[copy_id])


def test_a_restarted_gateway_sends_the_next_turn_where_the_history_is_cached(running: Running) -> None:
    turn = {"inputs": HISTORY, "parameters": {"max_new_tokens": 4}}
    with gateway(running) as first:
        assert invoke(first, SHORT, running) == "llm-1"  # equal loads take turns: the conversation lands on llm-2
        holder = invoke(first, turn, running)
    assert holder == "llm-2"
    with gateway(running) as restarted:
        # Its own memory is empty; each copy's first answer tells it what that copy holds.
        assert invoke(restarted, SHORT, running) == "llm-1"
        assert invoke(restarted, SHORT, running) == "llm-2"
        # By turns it would now pick llm-1; llm-2 said it holds the history.
        next_turn = {"inputs": HISTORY + "Assistant: they feel with them. User: and dogs?", "parameters": {
            "max_new_tokens": 4}}
        assert invoke(restarted, next_turn, running) == holder
