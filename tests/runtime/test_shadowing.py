"""The runtime's taps through its routes, driven by boto3: a request's copy goes to the shadow variant while the
client gets production's answer, the tap gets each exchange it asked for (a stream's whole answer), and nothing
the shadow or the tap does fails the client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.http_api import runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.tap import NOTHING, Exchanged, TapPlan
from pier.runtime.target import Target
from tests.runtime.servers import CopyServer, echo_app, hanging_up_server, serving, wait_until
from tests.runtime.servers import runtime_client as client

GENERATE = {"inputs": "hello world", "parameters": {"max_new_tokens": 4}}


@dataclass
class RecordingTap:
    """The gateway's part (gateway/taps.py) reduced to its decisions: capture everything, shadow everything."""

    plan_of: dict[str, TapPlan] = field(default_factory=lambda: {"AllTraffic": TapPlan(True, ("Shadow",)),
                                                              "Shadow": TapPlan(True, ())})
    seen: list[Exchanged] = field(default_factory=list)
    broken: bool = False

    def plan(self, endpoint: str, variant: str) -> TapPlan:
        if self.broken:
            raise RuntimeError("the tap broke (on purpose)")
        return self.plan_of.get(variant, NOTHING)

    def exchanged(self, exchange: Exchanged) -> None:
        self.seen.append(exchange)


@contextmanager
def tapped(copy: CopyServer, shadow_url: str, tap: RecordingTap) -> Iterator[str]:
    targets = {None: Target([copy.status("p-1", "llm/AllTraffic")], "llm/AllTraffic", "AllTraffic"),
               "Shadow": Target([CopyStatus("s-1", "llm/Shadow", CopyState.READY, url=shadow_url, pid=1)],
                                "llm/Shadow", "Shadow")}

    def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
        return targets[variant]

    service = RuntimeService(resolve, tap=tap)
    app = FastAPI()
    app.include_router(runtime_api(service))
    with serving(app) as url:
        yield url


@pytest.fixture
def shadow() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    with serving(echo_app(seen)) as url:
        yield url, seen


def test_the_shadow_gets_a_copy_and_the_client_production_answer(copy: CopyServer, shadow: Any) -> None:
    shadow_url, shadow_seen = shadow
    tap = RecordingTap()
    with tapped(copy, shadow_url, tap) as url:
        answer = client(url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE),
                                             ContentType="application/json", InferenceId="i-1")
        body = answer["Body"].read()
        assert answer["InvokedProductionVariant"] == "AllTraffic"
        assert json.loads(body)[0]["generated_text"].startswith("hello world")  # production's, not the echo
        assert wait_until(lambda: len(tap.seen) == 2)
    assert shadow_seen[0]["body"] == json.dumps(GENERATE).encode()
    assert shadow_seen[0]["headers"]["x-amzn-sagemaker-inference-id"] == "i-1"
    by_variant = {e.variant: e for e in tap.seen}
    assert by_variant["AllTraffic"].response == body
    assert by_variant["AllTraffic"].request_id == answer["ResponseMetadata"]["RequestId"]
    assert by_variant["Shadow"].response == json.dumps(GENERATE).encode()  # the shadow's answer: captured only
    assert by_variant["AllTraffic"].request_type == by_variant["Shadow"].request_type == "application/json"


def test_a_stream_is_captured_whole(copy: CopyServer, shadow: Any) -> None:
    tap = RecordingTap(plan_of={"AllTraffic": TapPlan(True, ())})
    with tapped(copy, shadow[0], tap) as url:
        stream = client(url).invoke_endpoint_with_response_stream(
            EndpointName="llm", Body=json.dumps({**GENERATE, "stream": True}), ContentType="application/json")
        parts = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
        assert wait_until(lambda: len(tap.seen) == 1)
    assert tap.seen[0].response == parts and parts.count(b"data:") == 4
    assert tap.seen[0].response_type.startswith("text/event-stream")


def test_a_shadow_that_hangs_up_and_a_broken_tap_fail_no_client(copy: CopyServer) -> None:
    with ExitStack() as stack:
        dead_url, received = stack.enter_context(hanging_up_server())
        tap = RecordingTap()
        url = stack.enter_context(tapped(copy, dead_url, tap))
        for _ in range(3):
            answer = client(url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE),
                                                 ContentType="application/json")
            assert json.loads(answer["Body"].read())[0]["generated_text"]
        assert wait_until(lambda: len(received) >= 3)  # the shadow got them, and dropped them
        assert [e.variant for e in tap.seen] == ["AllTraffic"] * 3  # no answer from it to capture
        tap.broken = True
        answer = client(url).invoke_endpoint(EndpointName="llm", Body=json.dumps(GENERATE),
                                             ContentType="application/json")
        assert json.loads(answer["Body"].read())[0]["generated_text"]
