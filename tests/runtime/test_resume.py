"""Requests that survive their copy (pier.runtime.attempts.resume), on real copies over the fake engine: a copy that
dies in the middle of an answer is replaced by another from where it stopped, on every route, and the client
gets the answer an uninterrupted copy gives; a request that takes copies down is stopped and refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from botocore.eventstream import EventStreamBuffer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.runtime.settings import ResumeSettings, RuntimeSettings
from pier.server.app import create_app
from pier.server.settings import ServerSettings
from tests.runtime.servers import CopyServer, gateway, wait_until
from tests.sockets import serving

CHAT = {"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 30, "ignore_eos": True,
        "temperature": 0}
TGI = {"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 30, "do_sample": True,
                                                       "temperature": 0.9, "seed": 11, "details": True}}


@dataclass
class Dying:
    """A copy's process that dies (drops the connection) after sending `after` body messages of an answer."""

    app: ASGIApp
    after: int | None = None
    requests: int = 0
    deaths: int = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in ("/ping", "/metrics"):
            await self.app(scope, receive, send)
            return
        self.requests += 1
        sent, dead = 0, False

        async def dying_send(message: Message) -> None:
            nonlocal sent, dead
            if message["type"] == "http.response.body" and self.after is not None:
                sent += 1
                if sent > self.after and not dead:
                    dead = True
                    self.deaths += 1
            if dead:
                raise ConnectionAbortedError("the copy died (on purpose)")
            await send(message)

        await self.app(scope, receive, dying_send)


@dataclass
class Copy:
    server: CopyServer
    dying: Dying


@contextmanager
def copy(after: int | None = None) -> Iterator[Copy]:
    engine = Engine(FakeRunner(n_ctx=4096), EngineConfig(max_running=4, step_tokens=64)).start()
    try:
        app = create_app(ServerSettings(model_name="fake-model"), engine=engine)
        dying = Dying(app, after)
        with serving(dying) as url:
            yield Copy(CopyServer(url, engine, app), dying)
    finally:
        engine.stop()


def decode_frames(body: bytes) -> list[dict[str, Any]]:
    """An event stream as botocore reads it: each frame's type and payload."""
    buffer = EventStreamBuffer()
    buffer.add_data(body)
    return [{"type": m.headers.get(":event-type") or m.headers.get(":exception-type"), "payload": m.payload}
            for m in buffer]


def comparable(route: str, body: bytes) -> Any:
    """What the client got, with what differs between two runs by nature (ids, times) taken out."""
    if route == "stream":
        events = decode_frames(body)
        assert all(e["type"] == "PayloadPart" for e in events), events
        body = b"".join(e["payload"] for e in events)
    text = body.decode()

    def strip(value: Any, top: bool = True) -> Any:
        if isinstance(value, dict):
            dropped = ("id", "created", "timings") if top else ("timings",)
            return {k: strip(v, False) for k, v in value.items() if k not in dropped}
        if isinstance(value, list):
            return [strip(v, top) for v in value]
        return value

    if text.startswith("data:"):
        blocks = [b.split(":", 1)[1].strip() for b in text.split("\n\n") if b.strip()]
        return [b if b == "[DONE]" else strip(json.loads(b)) for b in blocks]
    return strip(json.loads(text))


ROUTES = {
    "invoke-tgi": ("invoke", TGI),
    "invoke-chat": ("invoke", CHAT),
    "stream-tgi": ("stream", {**TGI, "stream": True}),
    "stream-chat": ("stream", {**CHAT, "stream": True}),
    "openai-chat-stream": ("openai", {**CHAT, "stream": True, "stream_options": {"include_usage": True}}),
    "openai-completion": ("openai", {"prompt": "the quick brown fox", "max_tokens": 30, "ignore_eos": True,
                                      "temperature": 1.0, "seed": 3}),
}


def call(url: str, route: str, payload: dict[str, Any]) -> httpx.Response:
    if route == "openai":
        path = "/v1/chat/completions" if "messages" in payload else "/v1/completions"
        return httpx.post(url + path, json={**payload, "model": "llm"}, timeout=30)
    suffix = "invocations-response-stream" if route == "stream" else "invocations"
    return httpx.post(f"{url}/endpoints/llm/{suffix}", json=payload, timeout=30)


@pytest.mark.parametrize("after", [1, 3, 8])
@pytest.mark.parametrize("name", list(ROUTES))
def test_a_copy_that_dies_mid_answer_is_replaced_from_where_it_stopped(name: str, after: int) -> None:
    route, payload = ROUTES[name]
    with copy(after) as a, copy() as b, gateway() as gw:
        gw.route("llm", [b.server.status("b")])
        expected = call(gw.url, route, payload)
        assert expected.status_code == 200, expected.text
        gw.route("llm", [a.server.status("a"), b.server.status("b")])
        got = call(gw.url, route, payload)
    assert got.status_code == 200, got.text
    assert a.dying.deaths == 1, "the first copy did not die under the request"
    assert comparable(route, got.content) == comparable(route, expected.content)
    if name.startswith("openai-chat"):
        ids = {e["id"] for e in comparable_raw(got.content)}
        assert len(ids) == 1  # one stream, one id, whichever copy wrote each event


def comparable_raw(body: bytes) -> list[dict[str, Any]]:
    blocks = [b.split(":", 1)[1].strip() for b in body.decode().split("\n\n") if b.strip()]
    return [json.loads(b) for b in blocks if b != "[DONE]"]


def test_a_request_that_takes_copies_down_is_stopped_and_refused_when_it_comes_back() -> None:
    with ExitStack() as stack:
        copies = [stack.enter_context(copy(2)) for _ in range(3)]
        gw = stack.enter_context(gateway())
        gw.route("llm", [c.server.status(f"c{i}") for i, c in enumerate(copies)])
        answer = call(gw.url, "openai", {**CHAT, "stream": True})
        events = comparable_raw(answer.content)
        assert answer.status_code == 200 and "error" in events[-1]
        message = events[-1]["error"]["message"]
        assert "when each of them died" in message and "c0" in message and "c1" in message
        assert sum(c.dying.deaths for c in copies) == 2 and copies[2].dying.requests == 0  # not sent to a third

        before = sum(c.dying.requests for c in copies)
        retried = call(gw.url, "openai", {**CHAT, "stream": True})  # the same request: refused at once
        assert retried.status_code == 502 and "refused for the next" in retried.json()["error"]["message"]
        assert sum(c.dying.requests for c in copies) == before
        call(gw.url, "invoke", {**CHAT, "stream": True})  # another route, another body: sent to copies
        assert sum(c.dying.requests for c in copies) > before


def test_resumes_are_bounded() -> None:
    settings = RuntimeSettings(resume=ResumeSettings(attempts=1, poison_copies=10))
    with ExitStack() as stack:
        copies = [stack.enter_context(copy(2)) for _ in range(3)]
        gw = stack.enter_context(gateway(settings))
        gw.route("llm", [c.server.status(f"c{i}") for i, c in enumerate(copies)])
        answer = call(gw.url, "invoke", CHAT)
    assert answer.status_code == 424 and answer.headers["x-amzn-ErrorType"] == "ModelError"
    assert "after 1 resume(s)" in answer.json()["message"]
    assert sum(c.dying.deaths for c in copies) == 2


def test_resuming_can_be_turned_off() -> None:
    settings = RuntimeSettings(resume=ResumeSettings(attempts=0))
    with copy(3) as a, copy() as b, gateway(settings) as gw:
        gw.route("llm", [a.server.status("a"), b.server.status("b")])
        answer = call(gw.url, "stream", {**TGI, "stream": True})
    events = decode_frames(answer.content)
    assert events[-1]["type"] == "ModelStreamError" and b.dying.requests == 0


def test_a_copy_whose_engine_stops_hands_its_requests_over() -> None:
    with copy() as a, copy() as b, gateway() as gw:
        a.server.engine.stop()  # its requests end with FinishReason.ERROR: the copy abandons them
        b_only = [b.server.status("b")]
        gw.route("llm", b_only)
        expected = call(gw.url, "openai", {**CHAT, "stream": True})
        gw.route("llm", [a.server.status("a"), *b_only])
        got = call(gw.url, "openai", {**CHAT, "stream": True})
    assert a.dying.requests == 1 and b.dying.requests == 2
    assert comparable("openai", got.content) == comparable("openai", expected.content)


def test_a_copy_known_to_resume_that_hangs_up_before_answering_is_replaced() -> None:
    """A pooled connection to a copy that just died, or a copy that died as the request arrived: nothing reached
    the client, and the copy is one of pier's (it answered in frames before), so another copy runs it."""
    from pier.backends.base import CopyState, CopyStatus
    from tests.runtime.servers import hanging_up_server

    with hanging_up_server() as (dead_url, received), copy() as b, gateway() as gw:
        dead = CopyStatus("a", "ic", CopyState.READY, url=dead_url, pid=7)
        gw.route("llm", [dead, b.server.status("b")])
        gw.service.forwarder.framed.add(("a", 7))
        answer = call(gw.url, "openai", {**CHAT, "stream": True})
        assert received and answer.status_code == 200 and comparable_raw(answer.content)[-1]["choices"]
        unknown = CopyStatus("a", "ic", CopyState.READY, url=dead_url, pid=8)  # a process never seen answering
        gw.route("llm", [unknown, b.server.status("b")])
        refused = call(gw.url, "invoke", CHAT)
        assert refused.status_code == 424 and "broke" in refused.json()["message"]


def test_a_resumed_request_refused_by_a_full_copy_waits_for_room() -> None:
    """The only copy left is full (MAX_CONCURRENT_REQUESTS) when the request comes to be resumed: it waits for
    a turn there instead of failing."""
    engine = Engine(FakeRunner(n_ctx=4096), EngineConfig(max_running=4, step_tokens=64)).start()
    try:
        app = create_app(ServerSettings(model_name="fake-model", max_concurrent_requests=1), engine=engine)
        with copy(3) as a, serving(app) as b_url, gateway() as gw:
            b = CopyServer(b_url, engine, app)
            gw.route("llm", [b.status("b")])
            expected = call(gw.url, "openai", {**CHAT, "stream": True})
            with ThreadPoolExecutor(2) as pool:  # b is busy with one request; another dies on a
                busy = pool.submit(call, gw.url, "invoke", {**CHAT, "max_tokens": 2000})
                assert wait_until(lambda: app.state.pier.admission.in_flight == 1)
                gw.route("llm", [a.server.status("a"), b.status("b")])
                got = pool.submit(call, gw.url, "openai", {**CHAT, "stream": True})
                assert wait_until(lambda: a.dying.deaths == 1, 10)
                assert not busy.done()  # b was full when the request came to be resumed
                assert busy.result(60).status_code == 200
                answer = got.result(60)
    finally:
        engine.stop()
    assert a.dying.deaths == 1
    assert comparable("openai", answer.content) == comparable("openai", expected.content)
    assert len({e["id"] for e in comparable_raw(answer.content)}) == 1  # the refusals did not lose the stream's id


def test_the_reader_takes_in_frames_across_copies_and_continues_from_them() -> None:
    """Resumable is a pure reader: bytes in any pieces, each frame once whole, what they carried kept across
    copies, and the request for the next copy made from it."""
    from pier.channel.frames import Continuation, data_frame, head_frame, state_frame, tokens_frame
    from pier.channel.headers import CONTINUE
    from pier.runtime.attempts.resume import Resumable, head_of

    reader = Resumable()
    assert reader.request(b"body", {"a": "1"}) == (b"body", {"a": "1"})  # nothing yet: sent as it came
    first = head_frame(200, [("content-type", "text/plain"), ("content-length", "9")]) + state_frame({"seed": 7})
    first += tokens_frame([1]) + data_frame([2], b"he")
    reader.feed(first[:5])
    assert reader.next() is None  # half a frame
    reader.feed(first[5:] + data_frame([3], b"l")[:4])  # the first copy dies in the middle of a frame
    frames = [reader.next() for _ in range(4)]
    assert [f.kind for f in frames if f] == [b"H", b"S", b"T", b"D"] and reader.next() is None
    assert frames[0] is not None and dict(head_of(frames[0]).headers) == {"content-type": "text/plain"}
    assert (reader.tokens, reader.state, reader.opened, reader.done) == ([1, 2], {"seed": 7}, True, False)
    reader.restart()  # the next copy's body
    reader.feed(data_frame([3], b"lo", last=True))
    last = reader.next()
    assert last is not None and last.data == b"lo" and reader.done and reader.tokens == [1, 2, 3]
    body, headers = reader.request(b"body", {"a": "1"})
    size = int(headers[CONTINUE])
    assert Continuation.decode(body[:size]) == Continuation((1, 2, 3), True, {"seed": 7}) and body[size:] == b"body"
