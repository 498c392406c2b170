"""TGI's Messages API on /invocations, checked chunk by chunk against TGI's own schema, and kept apart from pier's
OpenAI route, which answers in OpenAI's shapes. TGI's defaults (100 new tokens) on TGI payloads only.

The schema is TGI 2.0.0's (docs/openapi.json of huggingface/text-generation-inference at v2.0.0, the version of
the seeds' `huggingface-pytorch-tgi-inference:2.1-tgi2.0` container), with `additionalProperties: false` added:
TGI serializes exactly these fields, so anything more (or an OpenAI-only field) would be a difference.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from pier.engine.fake import FakeRunner
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client, sse_data

pytestmark = pytest.mark.anyio

TGI_2_0_SCHEMAS: dict[str, Any] = {
    "ChatCompletionChunk": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "object", "created", "model", "system_fingerprint", "choices"],
        "properties": {
            "id": {"type": "string"}, "object": {"type": "string"},
            "created": {"type": "integer", "minimum": 0}, "model": {"type": "string"},
            "system_fingerprint": {"type": "string"},
            "choices": {"type": "array", "items": {"$ref": "#/$defs/ChatCompletionChoice"}},
        },
    },
    "ChatCompletionChoice": {
        "type": "object", "additionalProperties": False, "required": ["index", "delta"],
        "properties": {
            "index": {"type": "integer", "minimum": 0}, "delta": {"$ref": "#/$defs/ChatCompletionDelta"},
            "logprobs": {"type": ["object", "null"]}, "finish_reason": {"type": ["string", "null"]},
        },
    },
    "ChatCompletionDelta": {
        "type": "object", "additionalProperties": False, "required": ["role"],
        "properties": {"role": {"type": "string"}, "content": {"type": ["string", "null"]},
                       "tool_calls": {"type": ["object", "null"]}},
    },
    "ChatCompletion": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "object", "created", "model", "system_fingerprint", "choices", "usage"],
        "properties": {
            "id": {"type": "string"}, "object": {"type": "string"},
            "created": {"type": "integer", "minimum": 0}, "model": {"type": "string"},
            "system_fingerprint": {"type": "string"},
            "choices": {"type": "array", "items": {"$ref": "#/$defs/ChatCompletionComplete"}},
            "usage": {"$ref": "#/$defs/Usage"},
        },
    },
    "ChatCompletionComplete": {
        "type": "object", "additionalProperties": False, "required": ["index", "message", "finish_reason"],
        "properties": {"index": {"type": "integer", "minimum": 0}, "message": {"$ref": "#/$defs/Message"},
                       "logprobs": {"type": ["object", "null"]}, "finish_reason": {"type": "string"}},
    },
    "Message": {
        "type": "object", "additionalProperties": False, "required": ["role"],
        "properties": {"role": {"type": "string"}, "content": {"type": ["string", "null"]},
                       "name": {"type": ["string", "null"]}, "tool_calls": {"type": ["array", "null"]}},
    },
    "Usage": {
        "type": "object", "additionalProperties": False,
        "required": ["prompt_tokens", "completion_tokens", "total_tokens"],
        "properties": {"prompt_tokens": {"type": "integer", "minimum": 0},
                       "completion_tokens": {"type": "integer", "minimum": 0},
                       "total_tokens": {"type": "integer", "minimum": 0}},
    },
}
TGI_FINISH_REASONS = {"length", "eos_token", "stop_sequence"}  # TGI's FinishReason Display


def validator(name: str, **changes: Any) -> Draft202012Validator:
    schema = {**TGI_2_0_SCHEMAS[name], **changes, "$defs": TGI_2_0_SCHEMAS}
    return Draft202012Validator(schema)


CHUNK = validator("ChatCompletionChunk")
COMPLETION = validator("ChatCompletion")
HELLO = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "hello"}]


async def messages(client: httpx.AsyncClient, **fields: Any) -> httpx.Response:
    return await client.post("/invocations", json={"messages": HELLO, "temperature": 0, **fields})


def chunks_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert all(block.startswith("data:{") for block in response.text.split("\n\n") if block.strip())  # axum's SSE
    return [json.loads(data) for data in sse_data(response.text)]


def check_tgi_stream(chunks: list[dict[str, Any]], finish_reason: str) -> str:
    """Every chunk valid against TGI's schema and readable as TGI clients read it; the text they add up to."""
    assert chunks, "no chunks"
    for chunk in chunks:
        errors = [e.message for e in CHUNK.iter_errors(chunk)]
        assert not errors, (errors, chunk)
        [choice] = chunk["choices"]
        assert choice["delta"]["role"] == "assistant" and isinstance(choice["delta"]["content"], str)
        assert chunk["object"] == "text_completion" and chunk["id"] == ""  # TGI 2.0's values
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + [finish_reason]
    assert finish_reason in TGI_FINISH_REASONS
    return "".join(c["choices"][0]["delta"]["content"] for c in chunks)


async def test_a_stream_ended_by_eos_matches_tgi_chunk_by_chunk() -> None:
    async with app_client() as client:
        prompt_tokens = (await messages(client, max_tokens=1)).json()["usage"]["prompt_tokens"]
    async with app_client(FakeRunner(n_ctx=1024, eos_every=prompt_tokens + 4)) as client:  # EOS as 5th token
        streamed = chunks_of(await messages(client, stream=True, max_tokens=50))
        whole = (await messages(client, max_tokens=50)).json()
    text = check_tgi_stream(streamed, "eos_token")
    assert len(streamed) == 5 and all(c["choices"][0]["delta"]["content"] for c in streamed[:-1])
    assert streamed[-1]["choices"][0]["delta"]["content"] == ""  # EOS has no text
    assert not COMPLETION.is_valid(streamed[-1]) and not [e for e in COMPLETION.iter_errors(whole)]
    assert whole["choices"][0]["message"] == {"role": "assistant", "content": text}
    assert whole["choices"][0]["finish_reason"] == "eos_token"
    assert whole["usage"]["completion_tokens"] == len(streamed)  # one chunk per token, EOS included
    assert whole["model"] == streamed[0]["model"] == "fake-model"


async def test_length_and_stop_sequence_finish_reasons(client: httpx.AsyncClient) -> None:
    capped = chunks_of(await messages(client, stream=True, max_tokens=6))
    text = check_tgi_stream(capped, "length")
    assert len(capped) == 6 and capped[-1]["choices"][0]["delta"]["content"] != ""  # the last token's own text
    stop = next(c["choices"][0]["delta"]["content"] for c in capped[2:] if c["choices"][0]["delta"]["content"].strip())
    stopped = chunks_of(await messages(client, stream=True, max_tokens=6, stop=[stop]))
    assert text.startswith(check_tgi_stream(stopped, "stop_sequence"))
    whole = (await messages(client, max_tokens=6, stop=[stop])).json()
    assert whole["choices"][0]["finish_reason"] == "stop_sequence"


async def test_usage_is_on_the_last_chunk_when_asked_for(client: httpx.AsyncClient) -> None:
    """TGI 2.0 sends no usage in a stream; when stream_options.include_usage asks (TGI >= 2.3), it rides on the
    last chunk, never on a chunk of its own with no choices (which would break clients reading choices[0])."""
    plain = chunks_of(await messages(client, stream=True, max_tokens=4))
    assert all("usage" not in c for c in plain)
    counted = chunks_of(await messages(client, stream=True, max_tokens=4, stream_options={"include_usage": True}))
    assert all(len(c["choices"]) == 1 for c in counted) and len(counted) == 4
    assert [c.get("usage") for c in counted[:-1]] == [None] * 3
    usage = counted[-1]["usage"]
    assert usage["completion_tokens"] == 4 and usage["total_tokens"] == usage["prompt_tokens"] + 4
    with_usage = validator("ChatCompletionChunk", properties={
        **TGI_2_0_SCHEMAS["ChatCompletionChunk"]["properties"], "usage": {"$ref": "#/$defs/Usage"}})
    assert all(with_usage.is_valid(c) for c in counted)


async def test_what_a_tgi_benchmark_client_reads(client: httpx.AsyncClient) -> None:
    """llmperf's SageMaker client (MESSAGES_API=true) reads `choices[0].delta.content` of every JSON line."""
    response = await messages(client, stream=True, max_tokens=5)
    generated = ""
    for line in response.text.splitlines():
        if "{" in line:
            generated += json.loads(line[line.find("{"):])["choices"][0]["delta"]["content"]
    assert generated and generated == check_tgi_stream(chunks_of(response), "length")


async def test_tgi_payloads_default_to_100_new_tokens(client: httpx.AsyncClient) -> None:
    """TGI 2.0's router: max_new_tokens defaults to 100 (generate), max_tokens too (Messages API)."""
    chat = (await messages(client, ignore_eos=True)).json()
    assert chat["usage"]["completion_tokens"] == 100 and chat["choices"][0]["finish_reason"] == "length"
    for path in ("/generate", "/invocations"):
        reply = (await client.post(path, json={"inputs": "the", "parameters": {"details": True}})).json()
        details = (reply[0] if isinstance(reply, list) else reply)["details"]
        assert (details["generated_tokens"], details["finish_reason"]) == (100, "length"), path


async def test_pier_openai_route_keeps_openai_shapes_and_semantics() -> None:
    settings = ServerSettings(model_name="fake-model", max_total_tokens=400)
    async with app_client(settings=settings) as client:
        response = await client.post("/v1/chat/completions", json={
            "messages": HELLO, "temperature": 0, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True}})
        whole = (await client.post("/v1/chat/completions", json={
            "messages": HELLO, "temperature": 0, "ignore_eos": True})).json()
    data = sse_data(response.text)
    assert data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]
    assert all(e["object"] == "chat.completion.chunk" and e["id"].startswith("chatcmpl-") for e in events)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert events[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] > 100  # OpenAI: up to the limit
    assert whole["object"] == "chat.completion" and whole["choices"][0]["finish_reason"] == "length"
    assert whole["usage"]["prompt_tokens"] + whole["usage"]["completion_tokens"] == 400
