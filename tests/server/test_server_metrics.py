"""/metrics: request counts, latencies, and the engine's token, cache and KV figures."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.conftest import app_client

pytestmark = pytest.mark.anyio


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, frozenset(labels.items()))]


async def test_requests_latencies_and_engine_figures(client: httpx.AsyncClient) -> None:
    body = {"prompt": "hello world the quick brown fox", "max_tokens": 5, "ignore_eos": True}
    for _ in range(2):  # the second finds the first's prompt in the prefix cache
        assert (await client.post("/v1/completions", json=body)).status_code == 200
    await client.post("/generate", json={"inputs": "x", "parameters": {"max_new_tokens": 0}})
    response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert value(text, "pier_http_requests_total", route="/v1/completions", status="200") == 2
    assert value(text, "pier_http_requests_total", route="/generate", status="422") == 1
    assert value(text, "pier_time_to_first_token_seconds_count") == 2
    assert value(text, "pier_inter_token_latency_seconds_count") == 2 * 4
    assert value(text, "pier_e2e_request_latency_seconds_count") == 2
    assert value(text, "pier_request_queue_time_seconds_count") == 2
    assert value(text, "pier_generations_total", outcome="length") == 2
    assert value(text, "pier_generated_tokens_total") == 10
    assert value(text, "pier_prompt_tokens_total") == 2 * 7
    assert value(text, "pier_prefix_cache_hit_tokens_total") > 0
    assert 0 < value(text, "pier_prefix_cache_hit_ratio") < 1
    assert value(text, "pier_prefix_cache_device_hit_ratio") == value(text, "pier_prefix_cache_hit_ratio")
    assert value(text, "pier_prefix_cache_host_hit_ratio") == 0  # no host memory in this app: nothing restored
    assert value(text, "pier_prefix_cache_restored_tokens_total") == 0
    assert value(text, "pier_host_cache_entries") == 0 == value(text, "pier_host_cache_bytes")
    assert value(text, "pier_kv_cells_total") == 1024
    assert value(text, "pier_kv_cells_used") > 0  # the finished prompts stay cached
    assert value(text, "pier_requests_running") == 0 and value(text, "pier_requests_waiting") == 0
    assert value(text, "pier_requests_in_flight") == 0


async def test_each_app_has_its_own_registry() -> None:
    async with app_client() as first, app_client() as second:
        await first.post("/v1/completions", json={"prompt": "hello", "max_tokens": 1})
        first_text = (await first.get("/metrics")).text
        second_text = (await second.get("/metrics")).text
    assert value(first_text, "pier_http_requests_total", route="/v1/completions", status="200") == 1
    assert ("pier_http_requests_total", frozenset({("route", "/v1/completions"), ("status", "200")})) not in samples(
        second_text
    )


async def test_engine_steps_are_timed_by_kind(client: httpx.AsyncClient) -> None:
    body = {"prompt": "hello world the quick brown fox", "max_tokens": 4, "ignore_eos": True}
    assert (await client.post("/v1/completions", json=body)).status_code == 200
    text = (await client.get("/metrics")).text
    steps = value(text, "pier_engine_steps_total")
    for name in ("pier_engine_forward_seconds", "pier_engine_step_seconds"):
        counts = {kind: value(text, f"{name}_count", kind=kind) for kind in ("decode", "mixed", "prompt")}
        assert counts["prompt"] >= 1 and counts["decode"] >= 1  # the prompt alone, then its stream alone
        # the step times are read a moment after the step count, so they may hold one more step (EngineStats)
        assert steps <= sum(counts.values()) <= steps + 1
        assert value(text, f"{name}_bucket", kind="decode", le="+Inf") == counts["decode"]
        assert value(text, f"{name}_sum", kind="decode") > 0
    assert value(text, "pier_engine_step_seconds_sum", kind="prompt") >= value(
        text, "pier_engine_forward_seconds_sum", kind="prompt")
