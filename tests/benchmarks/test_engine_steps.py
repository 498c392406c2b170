"""The benchmark scripts' synchronous scrape of one pier copy's engine step times (figures: tests/bench)."""

from __future__ import annotations

import httpx
import pytest
from engine_steps import EngineSteps, scrape

from tests.server.conftest import app_client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_read_from_a_real_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model server's own /metrics (the fake engine's app, over ASGI), read the way the scripts read it."""
    async with app_client() as client:
        before_text = (await client.get("/metrics")).text
        body = {"prompt": "hello world the quick brown fox", "max_tokens": 4, "ignore_eos": True}
        assert (await client.post("/v1/completions", json=body)).status_code == 200
        after_text = (await client.get("/metrics")).text
    pages = iter([before_text, after_text])
    monkeypatch.setattr(httpx, "get", lambda url, timeout: httpx.Response(200, text=next(pages)))
    figures = EngineSteps.between(scrape("http://copy"), scrape("http://copy"))
    assert figures.step["prompt"].steps >= 1 and figures.step["decode"].steps >= 1
    assert figures.forward["decode"].steps == figures.step["decode"].steps
