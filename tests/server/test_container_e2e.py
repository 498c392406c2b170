"""The model server as a real process on a real (synthetic, TINY) GGUF, driven by real clients."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.server.conftest import wait_until
from tests.server.processes import ContainerProcess, metric

pytestmark = pytest.mark.e2e

LONG = 3000  # tokens: many seconds of generation, so a test can act while it runs


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerProcess]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    with ContainerProcess(model_dir, log, HF_MODEL_ID="tiny-test") as process:
        yield process.wait_ready()


def client(server: ContainerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=30)


def test_openai_client_chat_streaming_and_usage(server: ContainerProcess) -> None:
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    whole = client(server).chat.completions.create(
        model="tiny-test", messages=messages, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    assert whole.model == "tiny-test" and whole.choices[0].finish_reason == "length"
    assert whole.usage is not None and whole.usage.completion_tokens == 12 and whole.usage.prompt_tokens > 5
    chunks = list(client(server).chat.completions.create(
        model="tiny-test", messages=messages, max_tokens=12, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 12


def test_openai_client_completions_with_token_ids(server: ContainerProcess) -> None:
    as_text = client(server).completions.create(model="tiny-test", prompt="the cat", max_tokens=6, temperature=0)
    ids = httpx.post(server.url + "/generate", json={
        "inputs": "the cat", "parameters": {"max_new_tokens": 1, "details": True}}).json()["details"]["prefill"]
    as_ids = client(server).completions.create(
        model="tiny-test", prompt=[t["id"] for t in ids], max_tokens=6, temperature=0)
    assert as_text.usage is not None and as_ids.usage is not None
    assert as_ids.usage.prompt_tokens == len(ids) == as_text.usage.prompt_tokens
    assert as_ids.choices[0].text == as_text.choices[0].text
    streamed = client(server).completions.create(
        model="tiny-test", prompt="the cat", max_tokens=6, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed) == as_text.choices[0].text


def test_tgi_payloads_through_invocations_and_generate_stream(server: ContainerProcess) -> None:
    answer = httpx.post(server.url + "/invocations", json={
        "inputs": "the cat", "parameters": {"max_new_tokens": 5, "details": True}}).json()
    assert isinstance(answer, list) and answer[0]["generated_text"].startswith("the cat")
    assert answer[0]["details"]["generated_tokens"] <= 5
    with httpx.stream("POST", server.url + "/generate_stream", json={
            "inputs": "the cat", "parameters": {"max_new_tokens": 5, "details": True}}) as response:
        events = [json.loads(line[len("data:"):]) for line in response.iter_lines() if line.startswith("data:")]
    assert "".join(e["token"]["text"] for e in events) == events[-1]["generated_text"]
    assert events[-1]["details"]["finish_reason"] in {"length", "eos_token"}
    chat = httpx.post(server.url + "/invocations", json={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}).json()
    assert chat["object"] == "text_completion"  # TGI 2.0's Messages API, as the seeds' container answers it
    assert chat["choices"][0]["message"]["role"] == "assistant"


def test_a_closed_stream_ends_within_a_second_and_keeps_its_kv_as_a_prefix(server: ContainerProcess) -> None:
    kv_before = metric(server.url, "pier_kv_cells_used")
    cancelled = metric(server.url, "pier_generations_total", outcome="cancelled")
    with httpx.stream("POST", server.url + "/v1/completions", json={
            "prompt": "tell me a long story", "max_tokens": LONG, "ignore_eos": True, "stream": True}) as response:
        lines = response.iter_lines()
        for _ in range(10):
            next(lines)
        assert metric(server.url, "pier_requests_running") == 1
        assert metric(server.url, "pier_kv_cells_used") > kv_before
    closed = time.monotonic()
    assert wait_until(lambda: metric(server.url, "pier_requests_running") == 0, timeout=1.0)
    assert time.monotonic() - closed < 1.0
    assert metric(server.url, "pier_prefix_cache_entries") >= 1  # what it computed stays, idle, for a retry
    assert metric(server.url, "pier_generations_total", outcome="cancelled") == cancelled + 1


def test_a_client_that_times_out_cancels_its_generation(server: ContainerProcess) -> None:
    with pytest.raises(openai.APITimeoutError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=0.5).completions.create(
            model="tiny-test", prompt="tell me another story", max_tokens=LONG, extra_body={"ignore_eos": True})
    gone = time.monotonic()
    assert wait_until(lambda: metric(server.url, "pier_requests_running") == 0, timeout=1.0)
    assert time.monotonic() - gone < 1.0
    assert metric(server.url, "pier_requests_running") == 0 and metric(server.url, "pier_prefix_cache_entries") >= 1
    assert metric(server.url, "pier_generations_total", outcome="disconnected") >= 1


def test_bad_input_is_answered_clearly(server: ContainerProcess) -> None:
    with pytest.raises(openai.BadRequestError) as too_long:
        client(server).completions.create(model="tiny-test", prompt="hi", max_tokens=5000)
    assert too_long.value.code == "context_length_exceeded"
    tgi = httpx.post(server.url + "/generate", json={"inputs": "hi", "parameters": {"max_new_tokens": 5000}})
    assert tgi.status_code == 422 and "`inputs` tokens + `max_new_tokens` must be <= 4096" in tgi.json()["error"]
    big = httpx.post(server.url + "/invocations", content=b"x" * (6 * 1024 * 1024 + 1))
    assert big.status_code == 413


def test_ping_stays_fast_while_a_huge_prompt_is_tokenized(server: ContainerProcess) -> None:
    prompt = "the quick brown fox jumps over the lazy dog " * 140_000  # just under 6 MiB
    answers: list[httpx.Response] = []
    sender = threading.Thread(target=lambda: answers.append(httpx.post(
        server.url + "/generate", json={"inputs": prompt, "parameters": {"max_new_tokens": 1}}, timeout=60)))
    sender.start()
    slowest = 0.0
    while sender.is_alive():
        started = time.monotonic()
        assert httpx.get(server.url + "/ping", timeout=5).status_code == 200
        slowest = max(slowest, time.monotonic() - started)
        time.sleep(0.05)
    sender.join()
    assert answers[0].status_code == 422 and "`inputs` tokens + `max_new_tokens`" in answers[0].json()["error"]
    assert slowest < 0.5


def test_over_max_concurrent_requests_is_429_with_retry_after(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "log", MAX_CONCURRENT_REQUESTS="1") as server:
        server.wait_ready()
        with httpx.stream("POST", server.url + "/v1/completions", json={
                "prompt": "hello", "max_tokens": LONG, "ignore_eos": True, "stream": True}) as response:
            lines = response.iter_lines()  # kept: a dropped iterator closes the stream, and the server cancels it
            next(lines)
            started = time.monotonic()
            with pytest.raises(openai.RateLimitError) as refused:
                client(server).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert time.monotonic() - started < 1.0
        assert refused.value.response.headers["retry-after"] == "1"
        assert "MAX_CONCURRENT_REQUESTS" in refused.value.message


def test_past_the_model_server_timeout_the_answer_is_424(small_gguf: Path, tmp_path: Path) -> None:
    # the SMALL model: the TINY one can write all LONG tokens within the 2 s on a fast core
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.gguf").symlink_to(small_gguf)
    with ContainerProcess(folder, tmp_path / "log", SAGEMAKER_MODEL_SERVER_TIMEOUT="2") as server:
        server.wait_ready()
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as failed:
            client(server).completions.create(
                model="m", prompt="hello", max_tokens=LONG, extra_body={"ignore_eos": True})
        assert failed.value.status_code == 424 and 1.5 < time.monotonic() - started < 2.0
        assert "SAGEMAKER_MODEL_SERVER_TIMEOUT" in failed.value.message


def test_sigterm_drains_then_exits(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "log") as server:
        server.wait_ready()
        events: list[str] = []

        def read_stream() -> None:
            with httpx.stream("POST", server.url + "/v1/completions", timeout=30, json={
                    "prompt": "hello", "max_tokens": 600, "ignore_eos": True, "stream": True}) as response:
                events.extend(line for line in response.iter_lines() if line.startswith("data:"))

        reader = threading.Thread(target=read_stream)
        reader.start()
        assert wait_until(lambda: metric(server.url, "pier_requests_running") == 1, timeout=5)
        server.terminate()
        signalled = time.monotonic()
        assert wait_until(lambda: httpx.get(server.url + "/ping").status_code == 503, timeout=1)
        refused = httpx.post(server.url + "/generate", json={"inputs": "hi"})
        assert refused.status_code == 503 and "shutting down" in refused.json()["error"]
        reader.join(30)
        assert events[-1] == "data: [DONE]"
        assert json.loads(events[-2][len("data: "):])["choices"][0]["finish_reason"] == "length"
        assert server.wait(30) == 0
        assert time.monotonic() - signalled < 30
    assert "draining 1 request(s)" in server.output()


def test_a_model_that_cannot_load_exits_with_the_reason(tmp_path: Path) -> None:
    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "model.gguf").write_bytes(b"not a gguf")
    with ContainerProcess(broken, tmp_path / "log") as server:
        assert server.wait(60) == 1
    assert "could not load" in server.output() and "valid GGUF" in server.output()
    with ContainerProcess(tmp_path / "missing", tmp_path / "log2") as server:
        assert server.wait(60) == 1
    assert "No model at" in server.output()


def test_a_copy_given_gpus_it_cannot_use_never_runs_on_the_cpu(model_dir: Path, tmp_path: Path) -> None:
    from pier.engine.devices import gpu_offload_supported, gpus

    if gpu_offload_supported() and gpus():
        pytest.skip("this host's llama.cpp has GPUs: tests/server/test_gpu_e2e.py covers it")
    with ContainerProcess(model_dir, tmp_path / "log", PIER_GPUS="1") as server:
        assert server.wait(60) == 1
    reason = "without a GPU backend" if not gpu_offload_supported() else "llama.cpp sees 0"
    assert "could not load" in server.output() and reason in server.output()
