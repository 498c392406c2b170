"""Each flavor's client against canned answers (httpx.MockTransport): bodies sent, events read, failures counted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from pier.bench.conversations import Exchange, Prompt
from pier.bench.options import Api
from pier.bench.request_record import RequestRecord
from pier.bench.streaming_client import ClientSettings, make_client
from pier.bench.subject import resolve
from tests.bench.eventstream_frames import model_stream_error, payload_part

PROMPT = Prompt(system=None, history=(), user="hello world", max_tokens=3, planned_input_tokens=2)
SSE = {"content-type": "text/event-stream"}


def sse(*events: Any) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def completion(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}], "usage": None}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


Handler = Callable[[httpx.Request], httpx.Response]


def send(
    handler: Handler,
    target: str = "http://h",
    api: Api | None = None,
    payload: Api = Api.OPENAI_CHAT,
    prompt: Prompt = PROMPT,
    timeout_s: float = 5.0,
    component: str | None = None,
) -> tuple[RequestRecord, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    async def go() -> RequestRecord:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recording)) as http:
            settings = ClientSettings(model="m", temperature=0.0, timeout_s=timeout_s, inference_component=component)
            client = make_client(http, resolve(target, api, label="t"), settings, payload)
            return await client.send(prompt, RequestRecord(index=0, conversation=0, round=0))

    return asyncio.run(go()), seen


def test_openai_completions_with_usage() -> None:
    body = sse(completion(" a"), completion(" b"), completion("", "length"), usage(7, 3), "[DONE]")
    record, (request,) = send(lambda r: httpx.Response(200, headers=SSE, content=body))
    sent = json.loads(request.content)
    assert request.url.path == "/v1/completions"
    assert sent | {"prompt": None} == {
        "prompt": None,
        "model": "m",
        "max_tokens": 3,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert sent["prompt"] == "hello world"
    assert record.ok and record.text == " a b"
    assert len(record.token_times) == 2  # the empty final chunk carries no token
    assert (record.output_tokens, record.output_tokens_source) == (3, "usage")
    assert (record.input_tokens, record.input_tokens_source) == (7, "usage")
    assert record.end is not None and record.end >= record.token_times[-1]


def test_token_id_prompt_is_sent_as_ids() -> None:
    ids = Prompt(system=(1, 2), history=(), user=(3, 4, 5), max_tokens=1, planned_input_tokens=5)
    _, (request,) = send(lambda r: httpx.Response(200, headers=SSE, content=sse("[DONE]")), prompt=ids)
    assert json.loads(request.content)["prompt"] == [1, 2, 3, 4, 5]


def test_chat_without_usage_counts_chunks() -> None:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    token = {"choices": [{"index": 0, "delta": {"content": " x"}, "finish_reason": None}]}
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
    prompt = Prompt(system="sys", history=(Exchange("u1", " r1"),), user="u2", max_tokens=2, planned_input_tokens=9)
    record, (request,) = send(
        lambda r: httpx.Response(200, headers=SSE, content=sse(role, token, token, done)),
        target="http://h/v1/chat/completions",
        prompt=prompt,
    )
    assert json.loads(request.content)["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": " r1"},
        {"role": "user", "content": "u2"},
    ]
    assert record.ok  # a finish_reason ends the answer even without [DONE]
    assert len(record.token_times) == 2  # the role-only opening chunk is not the first token
    assert (record.output_tokens, record.output_tokens_source) == (2, "chunks")
    assert (record.input_tokens, record.input_tokens_source) == (9, "planned")


def test_tgi_stream() -> None:
    def token(i: int, text: str, last: bool = False) -> str:
        event = {
            "index": i,
            "token": {"id": i, "text": text, "special": False},
            "generated_text": "ab" if last else None,
            "details": {"finish_reason": "length", "generated_tokens": 2, "input_length": 4} if last else None,
        }
        return json.dumps(event, separators=(",", ":"))

    body = f"data:{token(1, 'a')}\n\ndata:{token(2, 'b', last=True)}\n\n".encode()
    record, (request,) = send(lambda r: httpx.Response(200, headers=SSE, content=body), api=Api.TGI)
    assert request.url.path == "/generate_stream"
    assert json.loads(request.content) == {
        "inputs": "hello world",
        "parameters": {"max_new_tokens": 3, "details": True},
    }
    assert record.ok and record.text == "ab"
    assert (record.output_tokens, record.output_tokens_source, record.input_tokens) == (2, "usage", 4)


def test_sagemaker_response_stream_in_event_stream_frames() -> None:
    events = sse(completion(" a"), completion(" b", "length"), usage(5, 2), "[DONE]")
    body = payload_part(events[:10]) + payload_part(events[10:])
    record, (request,) = send(
        lambda r: httpx.Response(200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=body),
        target="http://gw/endpoints/e1",
        payload=Api.OPENAI_COMPLETIONS,
    )
    assert request.url.path == "/endpoints/e1/invocations-response-stream"
    assert request.headers["X-Amzn-SageMaker-Accept"] == "text/event-stream"
    assert json.loads(request.content)["stream"] is True
    assert record.ok and record.text == " a b" and record.output_tokens == 2


@pytest.mark.parametrize(
    ("target", "component", "header"),
    [
        ("http://gw/endpoints/e1/invocations", "ic-1", "ic-1"),
        ("http://gw/endpoints/e1/invocations", None, None),
        ("http://h/v1/completions", "ic-1", None),  # not a SageMaker route: no SageMaker header
    ],
)
def test_inference_component_header_only_on_sagemaker_routes(target: str, component: str | None,
                                                              header: str | None) -> None:
    events = sse(completion(" a", "length"), "[DONE]")
    _, (request,) = send(lambda r: httpx.Response(200, headers=SSE, content=events), target=target,
                         payload=Api.OPENAI_COMPLETIONS, component=component)
    assert request.headers.get("X-Amzn-SageMaker-Inference-Component") == header


def test_sagemaker_stream_error_is_counted_by_its_code() -> None:
    body = payload_part(sse(completion(" a"))) + model_stream_error("deadline")
    record, _ = send(
        lambda r: httpx.Response(200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=body),
        target="http://gw/endpoints/e1",
    )
    assert record.error_code == "ModelStreamError:ModelInvocationTimeExceeded"
    assert record.error_message == "deadline"


@pytest.mark.parametrize(
    ("response", "code", "message"),
    [
        (httpx.Response(500, json={"error": {"message": "engine died", "type": "server_error"}}), "500", "engine died"),
        (httpx.Response(429, json={"error": "overloaded", "error_type": "overloaded"}), "429", "overloaded"),
        (httpx.Response(424, json={"message": "Received client error"}), "424", "Received client error"),
        (httpx.Response(503, text="<html>busy</html>"), "503", "<html>busy</html>"),
        (
            httpx.Response(
                200, headers=SSE, content=sse(completion(" a"), {"error": {"message": "late", "code": "timeout"}})
            ),
            "event:timeout",
            "late",
        ),
        (
            httpx.Response(200, headers=SSE, content=sse({"error": "bad", "error_type": "generation"})),
            "event:generation",
            "bad",
        ),
        (httpx.Response(200, headers=SSE, content=sse(completion(" a"))), "stream_cut", "before the server"),
        (httpx.Response(200, headers=SSE, content=sse(completion("", "stop"), "[DONE]")), "no_tokens", "token"),
        (httpx.Response(200, headers=SSE, content=b"data: {not json\n\n"), "bad_event", "not JSON"),
        (httpx.Response(200, json={"choices": []}), "not_streamed", "not a stream"),
    ],
)
def test_failures_become_error_codes(response: httpx.Response, code: str, message: str) -> None:
    record, _ = send(lambda r: response)
    assert (record.ok, record.error_code) == (False, code)
    assert message in record.error_message


def test_connection_refused_is_an_error_code() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("All connection attempts failed", request=request)

    record, _ = send(refuse)
    assert record.error_code == "connection_error"
    assert "is the server running" in record.error_message


def test_a_broken_connection_mid_stream_is_a_cut_stream() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse(completion(" a"))
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    record, _ = send(lambda r: httpx.Response(200, headers=SSE, content=body()))
    assert record.error_code == "stream_cut"
    assert len(record.token_times) == 1


@pytest.mark.parametrize("closed", [httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError])
def test_a_kept_alive_connection_closed_before_any_answer_is_sent_once_more(closed: type[httpx.HTTPError]) -> None:
    answers = iter([closed("Server disconnected without sending a response.")])

    def first_closed(request: httpx.Request) -> httpx.Response:
        if (failure := next(answers, None)) is not None:
            raise failure
        return httpx.Response(200, headers=SSE, content=sse(completion(" a", "length"), "[DONE]"))

    record, seen = send(first_closed)
    assert record.ok and len(seen) == 2 and seen[0].content == seen[1].content


def test_a_server_that_closes_every_connection_unanswered_is_an_error_code() -> None:
    def always_closed(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

    record, seen = send(always_closed)
    assert (record.ok, record.error_code, len(seen)) == (False, "connection_closed", 2)
    assert "without answering" in record.error_message


def test_a_slow_answer_times_out() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse(completion(" a"))
        await asyncio.sleep(5)
        yield sse("[DONE]")

    record, _ = send(lambda r: httpx.Response(200, headers=SSE, content=body()), timeout_s=0.2)
    assert record.error_code == "timeout"
    assert record.end is not None and record.end < 1.0
