"""Log-probabilities in each API's shape over the fake runner, checked against its own logits: OpenAI chat
(whole and streamed), legacy completions (echo with the prompt's, text_offset), TGI details, top_n_tokens,
decoder_input_details and the stream, each answer validated against TGI 2.0's schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from pier.engine.fake import FakeRunner
from pier.engine.logprobs import log_softmax
from tests.server.conftest import app_client, sse_data
from tests.server.flavors.test_tgi_messages import validator as tgi_validator
from tests.server.flavors.tgi_generate_schema import validator

pytestmark = pytest.mark.anyio


def runner() -> FakeRunner:
    return FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64)


def expected(fake: FakeRunner, history: list[int], token: int) -> float:
    return float(log_softmax(fake._logits(history))[token])


async def test_chat_logprobs_whole_and_streamed_are_the_model_s() -> None:
    fake = runner()
    body = {"messages": [{"role": "user", "content": "hello world"}], "logprobs": True, "top_logprobs": 2,
            "max_tokens": 6, "temperature": 0}
    async with app_client(fake) as client:
        whole = (await client.post("/v1/chat/completions", json=body)).json()
        streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
    content = whole["choices"][0]["logprobs"]["content"]
    assert len(content) == whole["usage"]["completion_tokens"] == 6
    prompt = fake.tokenize("<user>hello world<assistant>", add_bos=True, special=True)
    history = list(prompt)
    for entry in content:
        token = next(t for t in range(fake.info.n_vocab) if list(fake.piece(t)) == entry["bytes"] and t > 2)
        assert entry["logprob"] == pytest.approx(expected(fake, history, token), abs=1e-5)
        assert len(entry["top_logprobs"]) == 2 and entry["top_logprobs"][0]["logprob"] >= entry["logprob"]
        history.append(token)
    events = [json.loads(d) for d in sse_data(streamed.text)[:-1]]
    streamed_content = [e for ev in events if ev["choices"] and ev["choices"][0]["logprobs"]
                        for e in ev["choices"][0]["logprobs"]["content"]]
    assert streamed_content == content


async def test_completion_logprobs_with_echo_have_the_prompt_s_and_offsets() -> None:
    fake = runner()
    async with app_client(fake) as client:
        answer = (await client.post("/v1/completions", json={
            "prompt": "the quick", "max_tokens": 4, "temperature": 0, "logprobs": 3, "echo": True})).json()
    choice = answer["choices"][0]
    lp = choice["logprobs"]
    prompt = fake.tokenize("the quick", add_bos=True, special=True)
    assert len(lp["tokens"]) == len(prompt) + 4
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None  # the first token has no context
    assert lp["token_logprobs"][2] == pytest.approx(expected(fake, prompt[:2], prompt[2]), abs=1e-5)
    assert all(1 <= len(top) <= 3 for top in lp["top_logprobs"][1:])  # a dict by text: "\ufffd" bytes merge
    assert choice["text"].startswith("the quick")
    offsets, texts = lp["text_offset"], lp["tokens"]
    assert offsets == [sum(len(t) for t in texts[:i]) for i in range(len(texts))]


async def test_completion_logprobs_stream_in_each_chunk() -> None:
    async with app_client(runner()) as client:
        response = await client.post("/v1/completions", json={
            "prompt": "hello", "max_tokens": 5, "temperature": 0, "logprobs": 1, "stream": True})
    chunks = [json.loads(d)["choices"][0] for d in sse_data(response.text)[:-1]]
    tokens = [t for c in chunks if c["logprobs"] for t in c["logprobs"]["token_logprobs"]]
    assert len(tokens) == 5 and all(isinstance(t, float) and t <= 0 for t in tokens)
    offsets = [o for c in chunks if c["logprobs"] for o in c["logprobs"]["text_offset"]]
    assert offsets == sorted(offsets) and offsets[0] == 0


async def test_tgi_details_top_tokens_and_prefill_validate_against_tgi_s_schema() -> None:
    fake = runner()
    async with app_client(fake) as client:
        answer = (await client.post("/generate", json={"inputs": "hello world", "parameters": {
            "details": True, "decoder_input_details": True, "top_n_tokens": 3, "max_new_tokens": 5}})).json()
        streamed = await client.post("/generate_stream", json={"inputs": "hello world", "parameters": {
            "details": True, "top_n_tokens": 2, "max_new_tokens": 5}})
    validator("GenerateResponse").validate(answer)
    details = answer["details"]
    prompt = fake.tokenize("hello world", add_bos=True, special=True)
    assert [p["id"] for p in details["prefill"]] == prompt and details["prefill"][0]["logprob"] is None
    assert details["prefill"][1]["logprob"] == pytest.approx(expected(fake, prompt[:1], prompt[1]), abs=1e-5)
    history = list(prompt)
    for token, top in zip(details["tokens"], details["top_tokens"], strict=True):
        assert token["logprob"] == pytest.approx(expected(fake, history, token["id"]), abs=1e-5)
        assert len(top) == 3 and top[0]["id"] == token["id"]  # greedy: the best is the chosen
        history.append(token["id"])
    events = [json.loads(d) for d in sse_data(streamed.text)]
    for event in events:
        validator("StreamResponse").validate(event)
        assert event["token"]["logprob"] <= 0 and len(event["top_tokens"]) == 2
    assert [e["token"]["logprob"] for e in events] == pytest.approx([t["logprob"] for t in details["tokens"]])


async def test_tgi_without_details_computes_no_logprobs() -> None:
    async with app_client(runner()) as client:
        streamed = await client.post("/generate_stream", json={"inputs": "hi", "parameters": {"max_new_tokens": 3}})
    assert all(json.loads(d)["token"]["logprob"] is None for d in sse_data(streamed.text))



TGI_CHAT_LOGPROBS = {  # TGI 2.0's ChatCompletionLogprobs
    "type": "object", "additionalProperties": False, "required": ["content"],
    "properties": {"content": {"type": "array", "items": {
        "type": "object", "additionalProperties": False, "required": ["token", "logprob", "top_logprobs"],
        "properties": {"token": {"type": "string"}, "logprob": {"type": "number"}, "top_logprobs": {
            "type": "array", "items": {"type": "object", "additionalProperties": False,
                                       "required": ["token", "logprob"],
                                       "properties": {"token": {"type": "string"}, "logprob": {"type": "number"}}}}}}}},
}


async def test_tgi_messages_api_logprobs_in_tgi_s_shape() -> None:
    body = {"messages": [{"role": "user", "content": "hello"}], "logprobs": True, "top_logprobs": 2,
            "max_tokens": 4, "temperature": 0}
    async with app_client(runner()) as client:
        whole = (await client.post("/invocations", json=body)).json()
        streamed = await client.post("/invocations", json={**body, "stream": True})
    chunk_validator = tgi_validator("ChatCompletionChunk")
    tgi_validator("ChatCompletion").validate(whole)
    logprobs = whole["choices"][0]["logprobs"]
    jsonschema.validate(logprobs, TGI_CHAT_LOGPROBS)
    assert len(logprobs["content"]) == 4
    events = [json.loads(d) for d in sse_data(streamed.text)]
    for event in events:
        chunk_validator.validate(event)
    per_token = [e["choices"][0]["logprobs"]["content"][0] for e in events if e["choices"][0]["logprobs"]]
    assert per_token == logprobs["content"]


async def test_completion_stream_with_echo_carries_the_prompt_s_logprobs_first() -> None:
    body = {"prompt": "the quick", "max_tokens": 4, "temperature": 0, "logprobs": 2, "echo": True}
    async with app_client(runner()) as client:
        whole = (await client.post("/v1/completions", json=body)).json()["choices"][0]["logprobs"]
        streamed = await client.post("/v1/completions", json={**body, "stream": True})
    parts = [json.loads(d)["choices"][0]["logprobs"] for d in sse_data(streamed.text)[:-1]]
    joined = {k: [v for p in parts if p for v in p[k]] for k in whole}
    assert joined == whole


async def test_a_streamed_echo_carries_the_prompt_s_logprobs_on_its_own_chunk() -> None:
    """The echoed prompt's logprobs ride on the chunk that carries the prompt's text, not on the first generated
    token's: a client that reads a chunk's tokens against its text finds the prompt's where the prompt is."""
    body = {"prompt": "the quick", "max_tokens": 4, "temperature": 0, "logprobs": 1, "echo": True, "stream": True}
    async with app_client(runner()) as client:
        streamed = await client.post("/v1/completions", json=body)
    chunks = [json.loads(d)["choices"][0] for d in sse_data(streamed.text)[:-1]]
    echoed = chunks[0]["logprobs"]
    assert chunks[0]["text"] == "the quick" and echoed["token_logprobs"][0] is None
    assert "".join(echoed["tokens"]).strip() == "the quick"  # the fake tokenizer reads "the" as " the"
    generated = [chunk["logprobs"]["tokens"] for chunk in chunks[1:] if chunk["logprobs"]]
    assert sum(len(tokens) for tokens in generated) == 4  # max_tokens: the prompt's are on the first chunk only


async def test_echo_with_max_tokens_0_scores_the_prompt_alone() -> None:
    """OpenAI's way to read a text's own log-probabilities (scoring, evaluation harnesses): `echo` with
    `max_tokens: 0` answers the prompt and its logprobs, and nothing generated; whole and streamed."""
    body = {"prompt": "the quick", "temperature": 0, "logprobs": 1, "echo": True}
    async with app_client(runner()) as client:
        generated = (await client.post("/v1/completions", json={**body, "max_tokens": 4})).json()
        scored = (await client.post("/v1/completions", json={**body, "max_tokens": 0})).json()
        streamed = await client.post("/v1/completions", json={**body, "max_tokens": 0, "stream": True,
                                                                "stream_options": {"include_usage": True}})
        alone = await client.post("/v1/completions", json={"prompt": "the quick", "max_tokens": 0})
    n_prompt = generated["usage"]["prompt_tokens"]
    [choice] = scored["choices"]
    assert (choice["text"], choice["finish_reason"]) == ("the quick", "length")
    assert choice["logprobs"] == {k: v[:n_prompt] for k, v in generated["choices"][0]["logprobs"].items()}
    assert scored["usage"] == {"prompt_tokens": n_prompt, "completion_tokens": 0, "total_tokens": n_prompt}
    events = [json.loads(d) for d in sse_data(streamed.text)[:-1]]
    texts = [(e["choices"][0]["text"], e["choices"][0]["finish_reason"]) for e in events if e["choices"]]
    assert texts == [("the quick", None), ("", "length")]
    assert events[0]["choices"][0]["logprobs"] == choice["logprobs"]
    assert events[-1]["usage"]["completion_tokens"] == 0
    assert alone.status_code == 400 and "max_tokens 0 needs echo" in alone.json()["error"]["message"]
