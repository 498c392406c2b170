"""A flowing stream is not cut: on the streaming routes (InvokeEndpointWithResponseStream, OpenAI's `stream`) the
deadline bounds the wait for the first part and each silence between parts, and an operator's total bound ends a
whole stream; the error says which limit was hit and which setting raises it. Copies here are plain HTTP apps
that stream at a set pace, behind the gateway's real routes, called with boto3 and the openai client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
from botocore.exceptions import EventStreamError
from fastapi import FastAPI
from starlette.responses import StreamingResponse

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.settings import RuntimeSettings
from tests.runtime.botocore_oracle import raw_messages
from tests.runtime.servers import Gateway, gateway, runtime_client
from tests.sockets import serving

DEADLINE_S = 2.0
PARTS = 8
EVERY_S = 0.5  # 8 parts, one every 0.5 s: 4 s, twice the deadline


def paced_copy(first_after_s: float, every_s: float, parts: int, then_silent_s: float = 0.0) -> FastAPI:
    """A copy whose answer streams `parts` SSE events, the first after `first_after_s`, then one every `every_s`;
    then it stays silent `then_silent_s` before it ends."""
    app = FastAPI()

    async def events(openai_shape: bool) -> AsyncIterator[bytes]:
        await asyncio.sleep(first_after_s)
        for n in range(parts):
            if n:
                await asyncio.sleep(every_s)
            text = {"choices": [{"index": 0, "text": f"part{n} ", "finish_reason": None}], "object": "text_completion",
                    "id": "x", "created": 0, "model": "m"} if openai_shape else {"token": {"text": f"part{n} "}}
            yield f"data: {json.dumps(text)}\n\n".encode()
        await asyncio.sleep(then_silent_s)
        if openai_shape:
            yield b"data: [DONE]\n\n"

    @app.post("/invocations")
    async def invocations() -> StreamingResponse:
        return StreamingResponse(events(False), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions() -> StreamingResponse:
        return StreamingResponse(events(True), media_type="text/event-stream")

    return app


@contextmanager
def paced(settings: RuntimeSettings, first_after_s: float = 0.1, every_s: float = EVERY_S, parts: int = PARTS,
          then_silent_s: float = 0.0) -> Iterator[Gateway]:
    with serving(paced_copy(first_after_s, every_s, parts, then_silent_s)) as copy_url, gateway(settings) as gw:
        gw.route("llm", [CopyStatus("paced-1", "ic", CopyState.READY, url=copy_url, pid=1)])
        yield gw


def sagemaker_stream(url: str) -> tuple[list[str], EventStreamError | None]:
    answer = runtime_client(url).invoke_endpoint_with_response_stream(EndpointName="llm", Body=b'{"inputs": "hi"}')
    parts: list[str] = []
    try:
        for event in answer["Body"]:
            parts.append(event["PayloadPart"]["Bytes"].decode())
    except EventStreamError as error:
        return parts, error
    return parts, None


def openai_stream(url: str) -> tuple[list[str], openai.APIError | None]:
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=30)
    texts: list[str] = []
    try:
        for chunk in client.completions.create(model="llm", prompt="hi", max_tokens=50, stream=True):
            texts.append(chunk.choices[0].text)
    except openai.APIError as error:
        return texts, error
    return texts, None


def test_a_response_stream_flowing_past_the_deadline_is_not_cut() -> None:
    with paced(RuntimeSettings(deadline_s=DEADLINE_S)) as gw:
        started = time.monotonic()
        parts, error = sagemaker_stream(gw.url)
    assert error is None, error
    assert "".join(parts).count("data: ") == PARTS and time.monotonic() - started > 2 * DEADLINE_S - 0.5


def test_an_openai_stream_flowing_past_the_deadline_is_not_cut() -> None:
    with paced(RuntimeSettings(openai_deadline_s=DEADLINE_S)) as gw:
        texts, error = openai_stream(gw.url)
    assert error is None, error
    assert texts == [f"part{n} " for n in range(PARTS)]


def test_a_stream_that_falls_silent_ends_with_model_invocation_time_exceeded() -> None:
    with paced(RuntimeSettings(deadline_s=DEADLINE_S), parts=2, then_silent_s=5.0) as gw:
        started = time.monotonic()
        parts, error = sagemaker_stream(gw.url)
        took = time.monotonic() - started
    assert len(parts) == 2 and error is not None
    assert error.response["Error"]["Code"] == "ModelStreamError"
    message = error.response["Error"]["Message"]
    assert "sent nothing for 2.0 s after its last part" in message and "PIER_INVOCATION_TIMEOUT_SECONDS" in message
    assert EVERY_S + DEADLINE_S - 0.3 < took < EVERY_S + DEADLINE_S + 1.5  # ended at the silence, not later
    with paced(RuntimeSettings(deadline_s=DEADLINE_S), parts=1, then_silent_s=5.0) as gw:  # the frame as sent
        raw = httpx.post(f"{gw.url}/endpoints/llm/invocations-response-stream", content=b"{}", timeout=30)
    *_, last = raw_messages(raw.content)
    assert last.headers[":exception-type"] == "ModelStreamError"
    assert json.loads(last.payload)["ErrorCode"] == "ModelInvocationTimeExceeded"


def test_a_stream_whose_first_part_never_comes_says_so() -> None:
    with paced(RuntimeSettings(deadline_s=DEADLINE_S), first_after_s=5.0) as gw:
        parts, error = sagemaker_stream(gw.url)
    assert parts == [] and error is not None and error.response["Error"]["Code"] == "ModelStreamError"
    assert "no first part within 2.0 s" in error.response["Error"]["Message"]


@pytest.mark.parametrize("route", ["sagemaker", "openai"])
def test_the_operators_total_bound_ends_a_flowing_stream_and_names_its_setting(route: str) -> None:
    settings = RuntimeSettings(deadline_s=DEADLINE_S, openai_deadline_s=DEADLINE_S, stream_total_s=1.6)
    with paced(settings) as gw:
        if route == "sagemaker":
            parts, error = sagemaker_stream(gw.url)
            assert error is not None and error.response["Error"]["Code"] == "ModelStreamError"
            message = error.response["Error"]["Message"]
        else:
            parts, failure = openai_stream(gw.url)  # type: ignore[assignment]
            assert failure is not None
            message = failure.message
    assert 0 < len(parts) < PARTS
    assert "still running after 1.6 s" in message and "PIER_STREAM_TIMEOUT_SECONDS" in message
