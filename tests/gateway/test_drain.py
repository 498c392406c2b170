"""A draining gateway (pier.gateway.drain), in process over copies on the fake engine: new work is refused with
503 in each route's shape and /ping fails, requests in flight go on, and those still running when the grace
period ends finish with an error in their own protocol, never a cut connection."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from botocore.eventstream import EventStreamBuffer
from fastapi import FastAPI

from pier.gateway.drain import Drain, Draining, grace_period
from pier.runtime.http_api import openai_api, runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.target import Target
from tests.runtime.servers import SlowRunner, copy_server
from tests.sockets import serving
from tests.waiting import until

SLOW = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 400, "ignore_eos": True,
        "temperature": 0}


@dataclass
class Plane:
    url: str
    drain: Drain


@contextmanager
def plane() -> Iterator[Plane]:
    with copy_server(SlowRunner(0.02)) as copy:
        target = Target([copy.status("a")], "ic")
        service = RuntimeService(lambda endpoint, component, variant: target)
        drain = Drain(service.forwarder.stop)
        app = FastAPI()
        app.include_router(runtime_api(service))
        app.include_router(openai_api(service))

        @app.get("/ping")
        async def ping() -> str:
            return ""

        @app.get("/test/grace-over")
        async def grace_over() -> None:  # what DrainingServer does when the grace period ends
            drain.stop_requests()

        app.add_middleware(Draining, drain=drain)
        with serving(app) as url:
            yield Plane(url, drain)


def openai_stream(url: str, started: threading.Event) -> list[Any]:
    events = []
    with httpx.stream("POST", url + "/v1/chat/completions", json={**SLOW, "model": "llm", "stream": True},
                      timeout=60) as response:
        for line in response.iter_lines():
            if line.startswith("data: "):
                started.set()
                data = line[len("data: "):]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events


def sagemaker_stream(url: str, started: threading.Event) -> list[dict[str, Any]]:
    buffer = EventStreamBuffer()
    with httpx.stream("POST", url + "/endpoints/llm/invocations-response-stream", json={**SLOW, "stream": True},
                      timeout=60) as response:
        for chunk in response.iter_raw():
            started.set()
            buffer.add_data(chunk)
    return [{"headers": m.headers, "payload": m.payload} for m in buffer]


def whole(url: str, started: threading.Event) -> httpx.Response:
    started.set()
    return httpx.post(url + "/endpoints/llm/invocations", json=SLOW, timeout=60)


def test_a_drain_refuses_new_work_in_each_routes_shape_and_ends_the_rest_in_protocol() -> None:
    with plane() as p, ThreadPoolExecutor(3) as pool:
        begun = [threading.Event() for _ in range(3)]
        running: list[Future[Any]] = [pool.submit(f, p.url, begun[i]) for i, f in
                                      enumerate((openai_stream, sagemaker_stream, whole))]
        for event in begun:
            assert event.wait(30)
        until(lambda: p.drain.in_flight == 3, 10, "three requests in flight")

        p.drain.draining = True  # what SIGTERM does
        assert httpx.get(p.url + "/ping").status_code == 503
        refused = httpx.post(p.url + "/endpoints/llm/invocations", json=SLOW)
        assert refused.status_code == 503 and refused.headers["x-amzn-ErrorType"] == "ServiceUnavailable"
        assert "shutting down" in refused.json()["message"]
        refused = httpx.post(p.url + "/v1/chat/completions", json={**SLOW, "model": "llm"})
        assert refused.status_code == 503 and refused.json()["error"]["type"] == "service_unavailable_error"
        refused = httpx.post(p.url + "/", json={}, headers={"X-Amz-Target": "SageMaker.ListEndpoints"})
        assert refused.status_code == 503 and refused.json()["__type"] == "ServiceUnavailable"
        assert not any(f.done() for f in running)  # the requests in flight go on meanwhile

        httpx.get(p.url + "/test/grace-over")
        chat, stream, answer = (f.result(timeout=30) for f in running)

    assert chat[-1] == "[DONE]" and "shutting down" in chat[-2]["error"]["message"]
    assert any("choices" in e for e in chat[:-2])  # it had been answering
    assert stream[-1]["headers"][":exception-type"] == "InternalStreamFailure"  # the service ended it, not the model
    assert "shutting down" in json.loads(stream[-1]["payload"])["Message"]
    assert all(e["headers"].get(":event-type") == "PayloadPart" for e in stream[:-1]) and len(stream) > 1
    assert answer.status_code == 503 and answer.headers["x-amzn-ErrorType"] == "ServiceUnavailable"


def test_requests_that_finish_within_the_grace_period_are_not_touched() -> None:
    with plane() as p:
        begun = threading.Event()
        with ThreadPoolExecutor(1) as pool:
            short = pool.submit(lambda: httpx.post(p.url + "/v1/chat/completions", json={
                **SLOW, "model": "llm", "max_tokens": 20}, timeout=60))
            until(lambda: p.drain.in_flight == 1, 10, "the request in flight")
            begun.set()
            p.drain.draining = True
            answer = short.result(timeout=30)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 20
        until(lambda: p.drain.in_flight == 0, 10, "no request in flight")  # what lets the gateway exit early


def test_the_grace_period_comes_from_the_flag_the_environment_or_30_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIER_GRACE_PERIOD_S", raising=False)
    assert grace_period() == 30.0
    monkeypatch.setenv("PIER_GRACE_PERIOD_S", "7.5")
    assert grace_period() == 7.5 and grace_period(2.0) == 2.0
    monkeypatch.setenv("PIER_GRACE_PERIOD_S", "soon")
    with pytest.raises(ValueError, match="PIER_GRACE_PERIOD_S"):
        grace_period()


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/endpoints/llm/invocations", "runtime"),
        ("/endpoints/llm/invocations-response-stream", "runtime"),
        ("/endpoints/llm/async-invocations", "runtime"),
        ("/v1/chat/completions", "openai"),
        ("/v1/embeddings", "openai"),
        ("/endpoints/llm/v1/completions", "openai"),
        ("/", "control"),
        ("/pier/deploy", "pier"),
    ],
)
def test_new_work_is_refused_in_the_dialect_of_its_path(path: str, dialect: str) -> None:
    response = Drain(lambda: None).refusal({"path": path})
    body = json.loads(bytes(response.body))
    assert response.status_code == 503
    shapes = {
        "runtime": response.headers.get("x-amzn-ErrorType") == "ServiceUnavailable" and "message" in body,
        "openai": body.get("error", {}).get("type") == "service_unavailable_error",
        "control": body.get("__type") == "ServiceUnavailable",
        "pier": set(body) == {"message"} and "x-amzn-ErrorType" not in response.headers,
    }
    assert [name for name, shaped in shapes.items() if shaped] == [dialect]
