"""A copy's resumable answers (pier/channel/frames.py): framed, with the token ids behind every byte, and continued by
another copy from any frame on with exactly the bytes the first copy would have sent next."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from pier.channel.frames import Continuation, Frame, FrameReader
from pier.channel.headers import CONTINUE, RESUMABLE
from pier.server.app import create_app
from pier.server.resumable_answers import PROGRESS, ResumableAnswer, progress_of
from pier.server.settings import ServerSettings
from tests.server.conftest import SlowRunner, app_client, start_engine

pytestmark = pytest.mark.anyio

GREEDY_CHAT = {"messages": [{"role": "user", "content": "hello world"}], "max_tokens": 24, "ignore_eos": True}
SEEDED_COMPLETION = {"prompt": "the quick brown fox", "max_tokens": 24, "ignore_eos": True, "temperature": 1.0,
                     "seed": 7}
FORCED_CALL = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 200, "temperature": 0,
               "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                   "type": "object", "properties": {"a": {"enum": ["x", "yy"]}}, "required": ["a"]}}}],
               "tool_choice": {"type": "function", "function": {"name": "f"}}}
TGI = {"inputs": "hello world", "parameters": {"max_new_tokens": 24, "details": True, "do_sample": True,
                                               "temperature": 0.8}}

CASES = [
    ("/v1/chat/completions", {**GREEDY_CHAT, "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", GREEDY_CHAT),
    ("/v1/completions", {**SEEDED_COMPLETION, "stream": True, "echo": True}),
    ("/v1/completions", SEEDED_COMPLETION),
    ("/generate_stream", TGI),
    ("/generate", TGI),
    ("/invocations", TGI),
    ("/invocations", {**GREEDY_CHAT, "stream": True}),
    # log-probabilities: the replayed tokens' come with the continuation, so a resumed answer reads the same
    ("/v1/chat/completions", {**GREEDY_CHAT, "logprobs": True, "top_logprobs": 2}),
    ("/v1/chat/completions", {**GREEDY_CHAT, "logprobs": True, "top_logprobs": 2, "stream": True}),
    ("/v1/completions", {**SEEDED_COMPLETION, "logprobs": 2, "echo": True}),
    ("/generate", {**TGI, "parameters": {**TGI["parameters"], "top_n_tokens": 2, "decoder_input_details": True}}),
    # a forced tool call: its grammar replays, its call ids follow the answer's id, held-back text stays held
    ("/v1/chat/completions", FORCED_CALL),
    ("/v1/chat/completions", {**FORCED_CALL, "stream": True}),
]


def frames(body: bytes) -> list[Frame]:
    reader = FrameReader()
    parsed = reader.feed(body)
    assert reader.pending == 0
    return parsed


def answer(parsed: list[Frame]) -> tuple[int, dict[str, str], bytes]:
    head = next(f for f in parsed if f.kind == b"H").json()
    data = b"".join(f.data for f in parsed if f.kind in (b"D", b"L"))
    assert parsed[-1].kind == b"L"
    return head["status"], {k: v for k, v in head["headers"]}, data


def comparable(data: bytes) -> Any:
    """The answer with what differs between copies by nature taken out: timings, and the time TGI's Messages API
    stamps on each chunk as it sends it (`object` "text_completion"; an OpenAI stream's `created` is the stream's
    own and must read the same)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            stamped = value.get("object") == "text_completion"
            return {k: strip(v) for k, v in value.items() if k != "timings" and not (stamped and k == "created")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    text = data.decode()
    if text.startswith("data:"):
        events = [block.split(":", 1)[1].strip() for block in text.split("\n\n") if block]
        return [e if e == "[DONE]" else strip(json.loads(e)) for e in events]
    return strip(json.loads(text))


async def post(client: httpx.AsyncClient, path: str, payload: dict[str, Any],
               continuation: Continuation | None = None) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {RESUMABLE: "1", "Content-Type": "application/json"}
    if continuation is not None:
        prefix = continuation.encode()
        headers[CONTINUE] = str(len(prefix))
        body = prefix + body
    return await client.post(path, content=body, headers=headers)


def case_id(path: str, payload: dict[str, Any]) -> str:
    return f"{path} {'stream' if payload.get('stream') or path.endswith('stream') else 'whole'}"


@pytest.mark.parametrize(("path", "payload"), CASES, ids=[case_id(*case) for case in CASES])
async def test_any_frame_is_a_point_another_copy_continues_from(path: str, payload: dict[str, Any]) -> None:
    async with app_client() as first, app_client() as second:
        plain = await first.post(path, json=payload)
        framed = await post(first, path, payload)
        assert framed.status_code == 200 and framed.headers["x-pier-frames"] == "1"
        parsed = frames(framed.content)
        status, headers, data = answer(parsed)
        assert status == plain.status_code == 200
        assert headers["content-type"] == plain.headers["content-type"]
        assert parsed[0].kind == b"S"  # the state comes first
        if "seed" in payload or "do_sample" in payload.get("parameters", {}):
            assert parsed[0].json()["seed"] is not None
        tokens = [t for f in parsed for t in f.tokens]
        if "tools" in payload:  # the call ends the answer, well before max_tokens
            assert 24 < len(tokens) < payload["max_tokens"] and b"call_" in data
        else:
            assert len(tokens) == 24

        # The copy dies after frame k: another continues from the tokens and state the gateway had by then.
        for k in range(len(parsed) - 1):
            seen = parsed[: k + 1]
            state = next((f.json() for f in reversed(seen) if f.kind == b"S"), {})
            sent = b"".join(f.data for f in seen if f.kind in (b"D", b"L"))
            continuation = Continuation(tuple(t for f in seen for t in f.tokens), opened=bool(sent), state=state)
            rest = answer(frames((await post(second, path, payload, continuation)).content))
            assert rest[0] == 200
            assert comparable(sent + rest[2]) == comparable(data), f"continued after frame {k}"


async def test_a_whole_answer_reports_tokens_while_it_is_computed_and_its_last_chunk_with_the_answer() -> None:
    async with app_client() as client:
        parsed = frames((await post(client, "/v1/chat/completions", GREEDY_CHAT)).content)
    kinds = [f.kind for f in parsed]
    assert kinds[-2:] == [b"H", b"L"] and set(kinds[:-2]) <= {b"S", b"T"}
    assert sum(len(f.tokens) for f in parsed if f.kind == b"T") == 23 and len(parsed[-1].tokens) == 1
    usage = json.loads(parsed[-1].data)["usage"]
    assert usage["completion_tokens"] == 24


async def test_a_continued_whole_answer_counts_every_token_once() -> None:
    async with app_client() as first, app_client() as second:
        parsed = frames((await post(first, "/generate", TGI)).content)
        state = parsed[0].json()
        tokens = tuple(t for f in parsed if f.kind == b"T" for t in f.tokens)[:10]
        rest = answer(frames((await post(second, "/generate", TGI, Continuation(tokens, False, state))).content))
    resumed = json.loads(rest[2])
    assert rest[1]["x-generated-tokens"] == "24"
    assert resumed["details"]["generated_tokens"] == 24 and resumed["details"]["seed"] == state["seed"]
    assert [t["id"] for t in resumed["details"]["tokens"][:10]] == list(tokens)
    assert resumed["generated_text"] == json.loads(parsed[-1].data)["generated_text"]  # the same seeded sequence


async def test_errors_before_any_work_come_framed_with_their_status() -> None:
    async with app_client() as client:
        bad = frames((await post(client, "/v1/chat/completions", {"messages": []})).content)
    status, _, data = answer(bad)
    assert status == 400 and "messages" in data.decode()


async def test_an_engine_that_stops_abandons_the_request_for_another_copy() -> None:
    engine = start_engine(SlowRunner(0.02, n_ctx=1024, n_seq_max=16, n_batch=64))
    app = create_app(ServerSettings(model_name="fake-model"), engine=engine)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
        long = {**TGI, "parameters": {"max_new_tokens": 200}}
        request = asyncio.ensure_future(post(client, "/generate_stream", long))
        await asyncio.sleep(0.3)
        await asyncio.to_thread(engine.stop)  # what a failed engine does to the requests it runs
        parsed = frames((await request).content)
    assert parsed[-1].kind == b"X" and "stopped" in parsed[-1].data.decode()
    assert not any(f.kind == b"L" for f in parsed)


async def _unsent(message: Any) -> None:
    raise AssertionError("keep sends nothing")


@pytest.mark.parametrize(("continuation", "head", "kept", "recorded"), [
    # a first copy records the head's id and creation time, and only those
    (None, {"id": "a", "created": 1, "model": "m"}, {"id": "a", "created": 1, "model": "m"},
     {"id": "a", "created": 1}),
    # a continuation takes them from the copy that began the request
    (Continuation(state={"id": "b", "created": 2, "seed": 5}), {"id": "a", "created": 1, "model": "m"},
     {"id": "b", "created": 2, "model": "m"}, {"id": "b", "created": 2, "seed": 5}),
    # a head without them (TGI's generate) keeps nothing
    (None, {}, {}, {}),
])
def test_keep_makes_a_heads_id_and_time_read_the_same_on_every_copy(
    continuation: Continuation | None, head: dict[str, Any], kept: dict[str, Any], recorded: dict[str, Any],
) -> None:
    progress = ResumableAnswer(continuation, _unsent)
    progress.keep(head)
    assert (head, progress.state) == (kept, recorded)


def test_the_progress_of_a_request_is_in_its_scope_only_when_it_is_resumable() -> None:
    progress = ResumableAnswer(None, _unsent)
    assert progress_of({PROGRESS: progress}) is progress
    assert progress_of({"type": "http"}) is None
