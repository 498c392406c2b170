"""Engine step figures from two scrapes of a pier copy's /metrics: quantiles from cumulative buckets, per kind."""

from __future__ import annotations

import math

import httpx
import pytest
from engine_steps import EngineSteps, quantile, scrape

from tests.server.conftest import app_client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(("buckets", "q", "expected"), [
    ({0.001: 0, 0.002: 10, math.inf: 10}, 0.5, 0.0015),  # all in one bucket: linear inside it
    ({0.001: 5, 0.002: 10, math.inf: 10}, 0.5, 0.001),  # the rank ends a bucket exactly
    ({0.001: 5, 0.002: 10, math.inf: 10}, 0.99, 0.00198),
    ({0.001: 0, 0.002: 0, math.inf: 4}, 0.5, 0.002),  # above every bound: the highest finite one
    ({0.001: 0, math.inf: 0}, 0.5, None),  # nothing observed
    ({}, 0.5, None),
])
def test_quantile_from_cumulative_buckets(buckets: dict[float, float], q: float, expected: float | None) -> None:
    got = quantile(buckets, q)
    assert got == expected if expected is None else got == pytest.approx(expected)


def test_figures_are_the_difference_of_two_scrapes() -> None:
    before = {("pier_engine_step_seconds", "decode"): {0.001: 4.0, 0.002: 4.0, math.inf: 4.0}}
    after = {("pier_engine_step_seconds", "decode"): {0.001: 4.0, 0.002: 14.0, math.inf: 14.0},
             ("pier_engine_step_seconds", "mixed"): {0.001: 0.0, 0.002: 0.0, math.inf: 2.0}}
    figures = EngineSteps.between(before, after)
    assert figures.step["decode"].steps == 10  # the 4 steps before the run are not the run's
    assert figures.step["decode"].p50_s == pytest.approx(0.0015)
    assert figures.step["mixed"].steps == 2 and figures.step["prompt"].steps == 0
    assert figures.cell("decode") == "1.5 / 2.0 (10)" and figures.cell("prompt") == "–"


@pytest.mark.anyio
async def test_read_from_a_real_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same parser on a model server's own /metrics (the fake engine's app, over ASGI)."""
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
