"""Requests on the engine under a deadline, cancelled by clients that hang up, failing loudly."""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest

from pier.engine.engine import Engine
from pier.engine.fake import FakeRunner
from pier.engine.runner import Batch
from pier.server.app import create_app
from pier.server.settings import ServerSettings
from tests.server.conftest import SlowRunner, app_client, sse_data, start_engine, wait_until
from tests.sockets import serving

LONG = {"prompt": "hello world", "max_tokens": 400, "ignore_eos": True}


class FailingRunner(FakeRunner):
    """A model whose forward pass breaks after a few steps."""

    def __init__(self, fail_after: int, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self.fail_after = fail_after

    def decode(self, batch: Batch) -> np.ndarray:
        if self.decode_calls >= self.fail_after:
            raise RuntimeError("simulated failure in llama_decode")
        return super().decode(batch)


def idle(engine: Engine) -> bool:
    """Nothing runs; the cancelled generation's KV is kept only as an idle prefix, evictable like a finished one's."""
    stats = engine.stats()
    return stats.running == 0 and stats.cached_prefixes == 1


@pytest.mark.parametrize("path", ["/v1/completions", "/generate_stream"])
def test_closing_a_stream_cancels_the_generation(path: str) -> None:
    runner = SlowRunner(0.01, n_ctx=1024, n_seq_max=8, n_batch=64)
    engine = start_engine(runner)
    body = (
        {**LONG, "stream": True}
        if path == "/v1/completions"
        else {"inputs": "hello world", "parameters": {"max_new_tokens": 400}}
    )
    try:
        with (
            serving(create_app(ServerSettings(), engine=engine)) as url,
            httpx.stream("POST", url + path, json=body, timeout=5) as response,
        ):
            lines = response.iter_lines()
            assert next(lines).startswith("data:")
            assert wait_until(lambda: engine.stats().running == 1)  # stats are a snapshot after each step
        closed = time.monotonic()
        assert wait_until(lambda: idle(engine), timeout=1.0)
        assert time.monotonic() - closed < 1.0
        assert engine.stats().generated_tokens < 300
    finally:
        engine.stop()


def test_a_client_that_hangs_up_cancels_a_non_streaming_generation() -> None:
    runner = SlowRunner(0.01, n_ctx=1024, n_seq_max=8, n_batch=64)
    engine = start_engine(runner)
    try:
        with serving(create_app(ServerSettings(), engine=engine)) as url:
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(url + "/v1/completions", json=LONG, timeout=0.3)
            gone = time.monotonic()
            assert wait_until(lambda: idle(engine), timeout=1.0)
            assert time.monotonic() - gone < 1.0
            metrics = httpx.get(url + "/metrics").text
        assert 'pier_generations_total{outcome="disconnected"} 1.0' in metrics
        assert 'pier_http_requests_total{route="/v1/completions",status="499"} 1.0' in metrics
    finally:
        engine.stop()


@pytest.mark.anyio
async def test_past_the_deadline_a_request_ends_with_424() -> None:
    settings = ServerSettings(timeout_s=1.0)  # the deadline is 0.9 s
    async with app_client(SlowRunner(0.02, n_ctx=1024, n_seq_max=8, n_batch=64), settings) as client:
        started = time.monotonic()
        openai = await client.post("/v1/completions", json=LONG)
        elapsed = time.monotonic() - started
        tgi = await client.post("/generate", json={"inputs": "hello", "parameters": {"max_new_tokens": 400}})
    assert openai.status_code == 424 and 0.85 < elapsed < 1.5
    error = openai.json()["error"]
    assert error["code"] == "timeout" and "SAGEMAKER_MODEL_SERVER_TIMEOUT" in error["message"]
    assert tgi.status_code == 424 and tgi.json()["error_type"] == "generation"


@pytest.mark.anyio
async def test_a_stream_flowing_past_the_deadline_is_not_cut() -> None:
    settings = ServerSettings(timeout_s=0.5)  # the deadline is 0.45 s; the stream takes over 1 s
    async with app_client(SlowRunner(0.02, n_ctx=1024, n_seq_max=8, n_batch=64), settings) as client:
        started = time.monotonic()
        openai = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 60, "ignore_eos": True, "stream": True})
        tgi = await client.post("/generate_stream", json={"inputs": "hello", "parameters": {"max_new_tokens": 60}})
        elapsed = time.monotonic() - started
    data = sse_data(openai.text)
    assert data[-1] == "[DONE]" and all("error" not in json.loads(d) for d in data[:-1]) and elapsed > 1.0
    last = json.loads(sse_data(tgi.text)[-1])
    assert "error" not in last and last["generated_text"]  # the last event: the whole text, no error


@pytest.mark.anyio
async def test_a_stream_silent_past_the_deadline_ends_with_an_error_event() -> None:
    settings = ServerSettings(timeout_s=0.5)
    async with app_client(SlowRunner(0.7, n_ctx=1024, n_seq_max=8, n_batch=64), settings) as client:
        openai = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 400, "ignore_eos": True, "stream": True})
        tgi = await client.post("/generate_stream", json={"inputs": "hello", "parameters": {"max_new_tokens": 400}})
    data = sse_data(openai.text)
    assert data[-1] == "[DONE]"
    error = json.loads(data[-2])["error"]
    assert error["code"] == "timeout" and "sent nothing for 0.5 s" in error["message"]
    assert "SAGEMAKER_MODEL_SERVER_TIMEOUT" in error["message"]
    last = json.loads(sse_data(tgi.text)[-1])
    assert last["error_type"] == "generation" and "sent nothing" in last["error"]


@pytest.mark.anyio
async def test_a_failing_model_is_an_error_not_a_silent_cut() -> None:
    async with app_client(FailingRunner(3, n_ctx=1024, n_seq_max=8, n_batch=64)) as client:
        plain = await client.post("/v1/completions", json=LONG)
        tgi = await client.post("/generate", json={"inputs": "hi", "parameters": {"max_new_tokens": 50}})
        stream = await client.post("/v1/completions", json={**LONG, "stream": True})
    assert plain.status_code == 500 and "simulated failure" in plain.json()["error"]["message"]
    assert tgi.status_code == 424 and tgi.json()["error_type"] == "generation"
    data = sse_data(stream.text)
    assert data[-1] == "[DONE]" and "simulated failure" in json.loads(data[-2])["error"]["message"]
