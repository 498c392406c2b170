"""Several choices per request over the fake runner: n on chat and completions (whole and streamed), seeds
seed + i, the prompt evaluated once for all of them, best_of picking by cumulative log-probability (OpenAI
completions, TGI with best_of_sequences), and each choice counted against the copy's concurrency."""

from __future__ import annotations

import json

import httpx
import pytest

from pier.channel.frames import Continuation
from pier.engine.engine import Engine
from pier.engine.fake import FakeRunner
from pier.engine.logprobs import log_softmax
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client, sse_data
from tests.server.flavors.tgi_generate_schema import validator
from tests.server.test_resumable_answers import answer, frames, post

pytestmark = pytest.mark.anyio
LONG_PROMPT = " ".join(["the quick brown fox jumps over the lazy dog"] * 12)


def runner() -> FakeRunner:
    return FakeRunner(n_ctx=2048, n_seq_max=16, n_batch=64)


async def test_n_choices_are_the_single_requests_with_seed_plus_i() -> None:
    base = {"prompt": "hello world", "max_tokens": 8, "temperature": 1.0}
    async with app_client(runner()) as client:
        three = (await client.post("/v1/completions", json={**base, "n": 3, "seed": 40})).json()
        singles = [(await client.post("/v1/completions", json={**base, "seed": 40 + i})).json() for i in range(3)]
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    assert [c["text"] for c in three["choices"]] == [s["choices"][0]["text"] for s in singles]
    assert len({c["text"] for c in three["choices"]}) == 3
    assert three["usage"]["completion_tokens"] == 24 and three["usage"]["prompt_tokens"] == 3


async def test_the_prompt_is_evaluated_once_for_all_choices(engine: Engine, client: httpx.AsyncClient) -> None:
    before = engine.stats().cached_prompt_tokens
    answer = (await client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": LONG_PROMPT}], "n": 3, "max_tokens": 4, "temperature": 1,
        "seed": 1})).json()
    after = engine.stats()
    prompt_tokens = answer["usage"]["prompt_tokens"]
    assert after.prompt_tokens >= 3 * prompt_tokens
    # two of the three forked the first one's prompt: all of it but the last token (which yields logits)
    assert after.cached_prompt_tokens - before == 2 * (prompt_tokens - 1)


async def test_n_streams_interleave_choices_by_index_with_one_usage() -> None:
    async with app_client(runner()) as client:
        response = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 5, "temperature": 1,
            "seed": 7, "stream": True, "stream_options": {"include_usage": True}})
        whole = (await client.post("/v1/chat/completions", json={
            "messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 5, "temperature": 1,
            "seed": 7})).json()
    data = sse_data(response.text)
    assert data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]
    texts = {0: "", 1: ""}
    for event in events[:-1]:
        choice = event["choices"][0]
        texts[choice["index"]] += choice["delta"].get("content") or ""
    assert [texts[0], texts[1]] == [c["message"]["content"] for c in whole["choices"]]
    assert sum(1 for e in events if e["choices"] and e["choices"][0]["finish_reason"]) == 2
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 10
    assert len({e["id"] for e in events}) == 1


async def test_best_of_returns_the_choices_with_the_highest_cumulative_logprob() -> None:
    fake = runner()
    async with app_client(fake) as client:
        best = (await client.post("/v1/completions", json={
            "prompt": "hello", "max_tokens": 6, "temperature": 1.5, "best_of": 4, "seed": 11})).json()
        each = [(await client.post("/v1/completions", json={
            "prompt": "hello", "max_tokens": 6, "temperature": 1.5, "seed": 11 + i, "logprobs": 0})).json()
            for i in range(4)]
    scores = {c["choices"][0]["text"]: sum(c["choices"][0]["logprobs"]["token_logprobs"]) for c in each}
    assert best["choices"][0]["text"] == max(scores, key=lambda text: scores[text])
    assert best["choices"][0]["logprobs"] is None  # ranked by them, shown only when asked
    assert best["usage"]["completion_tokens"] == 24  # every sequence generated counts


async def test_tgi_best_of_with_best_of_sequences_validates_against_tgi_s_schema() -> None:
    fake = runner()
    async with app_client(fake) as client:
        answer = (await client.post("/generate", json={"inputs": "hello world", "parameters": {
            "best_of": 3, "do_sample": True, "details": True, "max_new_tokens": 6}})).json()
    validator("GenerateResponse").validate(answer)
    details = answer["details"]
    others = details["best_of_sequences"]
    assert len(others) == 2

    def score(tokens: list[dict[str, float]]) -> float:
        return sum(t["logprob"] for t in tokens)
    assert all(score(details["tokens"]) >= score(o["tokens"]) for o in others)
    assert len({details["seed"], *(o["seed"] for o in others)}) == 3
    prompt = fake.tokenize("hello world", add_bos=True, special=True)
    first = details["tokens"][0]
    assert first["logprob"] == pytest.approx(float(log_softmax(fake._logits(prompt))[first["id"]]), abs=1e-5)


async def test_choices_count_against_the_copy_s_concurrency() -> None:
    settings = ServerSettings(model_name="fake-model", parallel=4)
    async with app_client(runner(), settings) as client:
        too_many = await client.post("/v1/completions", json={"prompt": "hi", "n": 5})
        fits = await client.post("/v1/completions", json={"prompt": "hi", "n": 4, "max_tokens": 2})
        tgi = await client.post("/generate", json={"inputs": "hi", "parameters": {
            "best_of": 4, "do_sample": True, "max_new_tokens": 2}})
    assert too_many.status_code == 400 and too_many.json()["error"]["param"] == "n"
    assert "concurrency of 4" in too_many.json()["error"]["message"]
    assert fits.status_code == 200 and len(fits.json()["choices"]) == 4
    assert tgi.status_code == 200


async def test_tgi_best_of_is_not_for_streams_nor_the_messages_api_n() -> None:
    async with app_client(runner()) as client:
        stream = await client.post("/generate_stream", json={"inputs": "hi", "parameters": {
            "best_of": 2, "do_sample": True}})
        messages = await client.post("/invocations", json={"messages": [{"role": "user", "content": "hi"}], "n": 2})
    assert stream.status_code == 422 and "not supported when streaming" in stream.json()["error"]
    assert messages.status_code == 422 and "n must be 1 on TGI's Messages API" in messages.json()["error"]


async def test_a_stream_of_several_choices_another_copy_began_ends_with_an_error_not_silently() -> None:
    payload = {"messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 5, "stream": True}
    async with app_client(runner()) as client:
        body = await post(client, "/v1/chat/completions", payload, Continuation((), opened=True, state={}))
    status, _, data = answer(frames(body.content))
    events = sse_data(data.decode())
    assert status == 200 and events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert "cannot be continued on another copy" in error["message"]
