"""Requests survive the copy they run on, with real processes: two copies the local backend started, one killed
with SIGKILL while eight requests stream (four on each), on every route family. All eight complete, each with
the text of an uninterrupted greedy run and its tokens counted once.

Bit-exact greedy text needs every token computed the same whichever way it was batched: the copies run with
flash attention off (PIER_FLASH_ATTENTION=false), since llama.cpp's CPU flash-attention kernel gives a token
slightly different results in a prefill than in a decode step, which can flip a near tie later on. Host memory is
off too (PIER_HOST_CACHE_MB=0): a prefix restored from it lands in whichever cells are free, and the order of a
sequence's cells is the order llama.cpp sums its attention in, so a restored history can also flip a near tie of
this random-weights model (seen once in five runs of this file)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from fastapi import FastAPI

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header
from pier.runtime.errors import EndpointNotFound
from pier.runtime.http_api import openai_api, runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.target import Target
from tests.backends.conftest import Running, backend_running, spec
from tests.runtime.servers import runtime_client
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

COPIES = ["llm-1", "llm-2"]
MAX_TOKENS = 60
# Prompts whose greedy answers have no near tie on this model: a near tie flips with the batch's composition
# (which requests share a forward pass), with or without a resume, as in any batched server. Chosen from 80 words
# by the smallest gap between the two likeliest tokens over the 60 greedy tokens, raw and through the chat
# template (logprobs of a copy run alone): every gap here is 0.022 or more; the words before ("one" ... "eight")
# had gaps down to 0.0014, and one run of this file in about eight failed.
PROMPTS = [f"{word} the quick brown fox jumps over the lazy dog" for word in
           ("flower", "kettle", "stone", "four", "violin", "planet", "cold", "island")]


@dataclass
class Plane:
    url: str
    running: Running
    service: RuntimeService


@pytest.fixture(scope="module")
def plane(small_f32_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    folder = tmp_path_factory.mktemp("small-f32-model")
    (folder / "model.gguf").symlink_to(small_f32_gguf)
    with backend_running(tmp_path_factory.mktemp("state")) as running:
        for index, copy_id in enumerate(COPIES):
            running.loop.run(running.backend.start(spec(copy_id, folder, index, PIER_PARALLEL="8",
                                                         PIER_FLASH_ATTENTION="false", PIER_HOST_CACHE_MB="0",
                                                         PIER_DRAIN_SECONDS="1")))

        def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
            if endpoint != "llm":
                raise EndpointNotFound(endpoint, "000000000000")
            return Target.of(endpoint, running.backend.statuses())

        service = RuntimeService(resolve)
        app = FastAPI()
        app.include_router(runtime_api(service))
        app.include_router(openai_api(service))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning",
                                               lifespan="off"))
        serving = asyncio.run_coroutine_threadsafe(server.serve(), running.loop.loop)
        running.wait_for(lambda: server.started, 10, "the gateway to listen")
        running.wait_ready(*COPIES, timeout=120)
        try:
            yield Plane(f"http://127.0.0.1:{server.config.port}", running, service)
        finally:
            server.should_exit = True
            serving.result(15)
            running.loop.run(service.aclose())


@dataclass(frozen=True)
class Answer:
    text: str
    completion_tokens: int | None  # as the answer reports it, where it does


Started = Callable[[], None]  # called once the first piece of the answer has arrived
# Called with the request's client built, just before it is sent; returns when all eight are ready, so the eight
# reach the copies together. Answers here take about half a second, and building a boto3 client alone can take
# that long: eight requests sent as each client came up could see the first answered before the last began.
Ready = Callable[[], None]


def sse_events(lines: Iterator[str]) -> Iterator[Any]:
    for line in lines:
        if line.startswith("data:"):
            data = line[len("data:"):].strip()
            yield data if data == "[DONE]" else json.loads(data)


def openai_chat(url: str, prompt: str, ready: Ready, started: Started) -> Answer:
    body = {"model": "llm", "messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS,
            "temperature": 0, "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    text, usage, done = "", None, False
    with httpx.Client(timeout=120) as client:
        ready()
        with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            for event in sse_events(response.iter_lines()):
                assert "error" not in event, event
                if event == "[DONE]":
                    done = True
                    continue
                started()
                if event.get("usage"):
                    usage = event["usage"]["completion_tokens"]
                for choice in event["choices"]:
                    text += choice["delta"].get("content") or ""
    assert done
    return Answer(text, usage)


def openai_completion(url: str, prompt: str, ready: Ready, started: Started) -> Answer:
    body = {"model": "llm", "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    text, usage = "", None
    with httpx.Client(timeout=120) as client:
        ready()
        with client.stream("POST", url + "/v1/completions", json=body) as response:
            assert response.status_code == 200
            for event in sse_events(response.iter_lines()):
                if event == "[DONE]":
                    continue
                assert "error" not in event, event
                started()
                if event.get("usage"):
                    usage = event["usage"]["completion_tokens"]
                text += "".join(choice["text"] for choice in event["choices"])
    return Answer(text, usage)


def openai_responses(url: str, prompt: str, ready: Ready, started: Started) -> Answer:
    """The openai client's Responses API, streamed: its events numbered on, as one stream, across the resume."""
    with httpx.Client(timeout=120) as http:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", http_client=http, max_retries=0)
        ready()
        events = []
        for event in client.responses.create(model="llm", input=prompt, max_output_tokens=MAX_TOKENS, temperature=0,
                                             stream=True, extra_body={"ignore_eos": True}):
            assert event.type != "error", event
            started()
            events.append(event)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.incomplete"  # max_output_tokens reached
    final = events[-1].response
    assert len({e.response.id for e in events if hasattr(e, "response")}) == 1
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert final.output_text == text
    return Answer(text, final.usage.output_tokens if final.usage else None)


def sagemaker_stream_tgi(url: str, prompt: str, ready: Ready, started: Started) -> Answer:
    """boto3's InvokeEndpointWithResponseStream with a TGI payload: TGI's SSE events inside PayloadParts."""
    body = {"inputs": prompt, "parameters": {"max_new_tokens": MAX_TOKENS, "details": True}, "stream": True}
    client = runtime_client(url, read_timeout=120)
    ready()
    reply = client.invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=json.dumps(body), ContentType="application/json")
    raw = b""
    for event in reply["Body"]:
        assert "PayloadPart" in event, event  # a ModelStreamError would show here
        started()
        raw += event["PayloadPart"]["Bytes"]
    events = list(sse_events(iter(raw.decode().splitlines())))
    tokens = "".join(e["token"]["text"] for e in events)
    # /invocations answers TGI's full text: the prompt and what was generated
    assert events[-1]["generated_text"] == prompt + tokens
    assert [e["index"] for e in events] == list(range(1, len(events) + 1))
    return Answer(tokens, events[-1]["details"]["generated_tokens"])


def sagemaker_invoke_chat(url: str, prompt: str, ready: Ready, started: Started) -> Answer:
    """boto3's InvokeEndpoint, a whole answer: the copy dies while computing it."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True}
    client = runtime_client(url, read_timeout=120)
    ready()
    started()
    reply = client.invoke_endpoint(EndpointName="llm", Body=json.dumps(body), ContentType="application/json")
    answer = json.loads(reply["Body"].read())
    return Answer(answer["choices"][0]["message"]["content"], answer["usage"]["completion_tokens"])


Family = Callable[[str, str, Ready, Started], Answer]
FAMILIES: dict[str, Family] = {"openai-chat": openai_chat, "openai-completions": openai_completion,
                               "openai-responses": openai_responses, "sagemaker-stream-tgi": sagemaker_stream_tgi,
                               "sagemaker-invoke-chat": sagemaker_invoke_chat}


def run_all(plane: Plane, family: Family, meanwhile: Callable[[], None] | None = None) -> list[Answer]:
    """The eight requests at once; `meanwhile` runs when every one of them has begun to answer."""
    begun = [threading.Event() for _ in PROMPTS]
    together = threading.Barrier(len(PROMPTS))

    def ready() -> None:
        together.wait(60)

    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        futures = [pool.submit(family, plane.url, prompt, ready, begun[i].set) for i, prompt in enumerate(PROMPTS)]
        if meanwhile is not None:
            for event in begun:
                assert event.wait(60), "a request did not begin"
            meanwhile()
        return [future.result(timeout=180) for future in futures]


# Each family with the first copy killed; the two stream families with the second one killed too.
KILLS = [*[(family, 0) for family in FAMILIES], ("openai-chat", 1), ("sagemaker-stream-tgi", 1)]


@pytest.mark.parametrize(("family", "victim"), KILLS, ids=[f"{f}-kill-{COPIES[v]}" for f, v in KILLS])
def test_eight_requests_survive_a_copy_killed_under_four_of_them(plane: Plane, family: str, victim: int) -> None:
    run = FAMILIES[family]
    reference = run_all(plane, run)
    assert all(a.completion_tokens == MAX_TOKENS for a in reference)
    chooser = plane.service.forwarder.chooser("ic")
    status = plane.running.status(COPIES[victim])
    generated = _generated(status)
    killed: list[int] = []

    def kill() -> None:
        plane.running.wait_for(lambda: [chooser.outstanding(c) for c in COPIES] == [4, 4], 30,
                               "four requests on each copy")
        assert status.pid is not None
        # A whole answer shows nothing before it is complete: wait until the copy is well into its four.
        plane.running.wait_for(lambda: _generated(status) >= generated + 4 * 5, 30, "the copy to generate")
        os.kill(status.pid, signal.SIGKILL)
        killed.append(status.pid)

    answers = run_all(plane, run, kill)
    assert killed
    assert [a.text for a in answers] == [a.text for a in reference]  # 8 of 8, as if nothing happened
    assert all(a.completion_tokens == MAX_TOKENS for a in answers)  # each token counted once
    plane.running.wait_for(lambda: plane.running.status(COPIES[victim]).state is CopyState.READY, 120,
                           "the killed copy to be replaced")
    assert plane.running.status(COPIES[victim]).pid not in killed


def _generated(copy: CopyStatus) -> float:
    """The tokens the copy has generated so far (its engine's counter; /metrics too answers only its secret)."""
    assert copy.url is not None
    text = httpx.get(copy.url + "/metrics", headers=copy_secret_header(copy.secret), timeout=5).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("pier_generated_tokens_total"))


def test_a_copy_stopped_past_its_drain_time_hands_its_requests_over(plane: Plane) -> None:
    """Scale-in or a rolling update: SIGTERM, and the requests outlast the copy's drain (1 s here). Its engine
    stops under them and it gives them up; the gateway resumes them on the other copy."""
    reference = run_all(plane, openai_chat)
    status = plane.running.status(COPIES[0])
    chooser = plane.service.forwarder.chooser("ic")

    def stop() -> None:
        plane.running.wait_for(lambda: [chooser.outstanding(c) for c in COPIES] == [4, 4], 30, "four on each copy")
        assert status.pid is not None
        os.kill(status.pid, signal.SIGTERM)

    answers = run_all(plane, openai_chat, stop)
    assert [a.text for a in answers] == [a.text for a in reference]
    assert all(a.completion_tokens == MAX_TOKENS for a in answers)
    plane.running.wait_for(lambda: plane.running.status(COPIES[0]).state is CopyState.READY, 120, "the copy back")
