"""Stopping drains, on a real `pier up` process: SIGTERM with twelve requests of different lengths in flight,
on every route family. New work is refused in each route's shape, the requests that can finish within the
grace period finish, the others end with an error in their own protocol once it is over (never a cut
connection), and the gateway then exits and stops its copies."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.eventstream import EventStreamBuffer

from tests.backends.conftest import alive
from tests.e2e.gateway_process import GatewayProcess
from tests.server.processes import copy_metric
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

GRACE_S = 25.0
LONG = 3500  # tokens: far more than the grace period lets a copy generate (30-80 ms a step here)


@dataclass(frozen=True)
class Outcome:
    family: str
    max_tokens: int
    completed: bool  # the whole answer, as asked for
    error: str | None  # the in-protocol error it ended with instead
    ended: float  # time.monotonic() when the answer was over


def sagemaker(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")


@pytest.fixture(scope="module")
def gateway(small_f32_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("drain")
    model = folder / "model"
    model.mkdir()
    (model / "model.gguf").symlink_to(small_f32_gguf)
    process = GatewayProcess(folder / "state", free_port(), folder / "gateway.log",
                             {"PIER_GRACE_PERIOD_S": str(GRACE_S)})
    try:
        process.wait_ready()
        control = sagemaker(process.url, "sagemaker")
        control.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::1:role/r", PrimaryContainer={
            "Image": "pier", "ModelDataUrl": f"file://{model}", "Environment": {"PIER_PARALLEL": "12"}})
        control.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])
        control.create_endpoint(EndpointName="drain", EndpointConfigName="c")
        control.get_waiter("endpoint_in_service").wait(EndpointName="drain", WaiterConfig={"Delay": 1,
                                                                                             "MaxAttempts": 120})
        yield process
    finally:
        process.stop(30)


def chat(max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"count to {max_tokens}"}], "max_tokens": max_tokens,
            "temperature": 0, "ignore_eos": True, **extra}


def openai_stream(url: str, n: int) -> Outcome:
    events: list[Any] = []
    with httpx.stream("POST", url + "/v1/chat/completions", timeout=120,
                      json=chat(n, model="drain", stream=True, stream_options={"include_usage": True})) as response:
        assert response.status_code == 200
        for line in response.iter_lines():  # a cut connection raises here
            if line.startswith("data: "):
                data = line[len("data: "):]
                events.append(data if data == "[DONE]" else json.loads(data))
    assert events[-1] == "[DONE]", events[-3:]
    last = events[-2]
    if "error" in last:
        return Outcome("openai-stream", n, False, last["error"]["message"], time.monotonic())
    return Outcome("openai-stream", n, last["usage"]["completion_tokens"] == n, None, time.monotonic())


def sagemaker_stream(url: str, n: int) -> Outcome:
    body = {"inputs": f"count to {n}", "parameters": {"max_new_tokens": n, "details": True}, "stream": True}
    buffer = EventStreamBuffer()
    with httpx.stream("POST", url + "/endpoints/drain/invocations-response-stream", json=body,
                      timeout=120) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw():
            buffer.add_data(chunk)
    frames = list(buffer)
    assert buffer._data == b"", "the stream was cut inside a frame"
    last = frames[-1]
    if last.headers.get(":message-type") == "exception":
        assert last.headers[":exception-type"] == "InternalStreamFailure"  # the gateway's drain: a service failure
        return Outcome("sagemaker-stream", n, False, json.loads(last.payload)["Message"], time.monotonic())
    text = b"".join(f.payload for f in frames).decode()
    final = json.loads(text.strip().split("\n\n")[-1][len("data:"):])
    return Outcome("sagemaker-stream", n, final["details"]["generated_tokens"] == n, None, time.monotonic())


def sagemaker_invoke(url: str, n: int) -> Outcome:
    reply = httpx.post(url + "/endpoints/drain/invocations", json=chat(n), timeout=120)
    if reply.status_code != 200:
        assert reply.status_code == 503 and reply.headers["x-amzn-ErrorType"] == "ServiceUnavailable"
        return Outcome("sagemaker-invoke", n, False, reply.json()["message"], time.monotonic())
    return Outcome("sagemaker-invoke", n, reply.json()["usage"]["completion_tokens"] == n, None, time.monotonic())


def openai_whole(url: str, n: int) -> Outcome:
    reply = httpx.post(url + "/v1/completions", json={"model": "drain", "prompt": f"count to {n}", "max_tokens": n,
                                                       "temperature": 0, "ignore_eos": True}, timeout=120)
    if reply.status_code != 200:
        assert reply.status_code == 503, reply.text
        return Outcome("openai-whole", n, False, reply.json()["error"]["message"], time.monotonic())
    return Outcome("openai-whole", n, reply.json()["usage"]["completion_tokens"] == n, None, time.monotonic())


FAMILIES: list[Callable[[str, int], Outcome]] = [openai_stream, sagemaker_stream, sagemaker_invoke, openai_whole]
# The others take long enough to be running at SIGTERM, however slowly the twelve arrive, and end in the grace.
LENGTHS = [[120, 250, LONG], [140, 230, LONG], [160, 210, LONG], [180, 190, LONG]]


def copy_pids(url: str) -> list[int]:
    return [c["pid"] for c in httpx.get(url + "/pier/copies").json()["copies"] if c["pid"]]


def test_sigterm_drains_twelve_requests_then_stops(gateway: GatewayProcess) -> None:
    url = gateway.url
    copies = copy_pids(url)
    copy = httpx.get(url + "/pier/copies").json()["copies"][0]
    with ThreadPoolExecutor(12) as pool:
        futures = [pool.submit(family, url, n) for family, lengths in zip(FAMILIES, LENGTHS, strict=True)
                   for n in lengths]
        until(lambda: copy_metric(url, copy, "pier_requests_in_flight") == 12, 60, "twelve requests in flight")
        gateway.terminate()
        terminated = time.monotonic()
        until(lambda: httpx.get(url + "/ping").status_code == 503, 5, "/ping failing")
        refused = httpx.post(url + "/endpoints/drain/invocations", json=chat(4))
        assert refused.status_code == 503 and refused.headers["x-amzn-ErrorType"] == "ServiceUnavailable"
        refused = httpx.post(url + "/v1/chat/completions", json=chat(4, model="drain"))
        assert refused.status_code == 503 and "shutting down" in refused.json()["error"]["message"]
        outcomes = [f.result(timeout=GRACE_S + 60) for f in futures]  # none raised: nothing was cut

    for outcome in outcomes:
        if outcome.max_tokens < LONG:  # finished within the grace period, untouched
            assert outcome.completed and outcome.error is None, outcome
        else:  # ended in its protocol when the grace period was over, not before
            assert not outcome.completed and "shutting down" in (outcome.error or ""), outcome
            assert outcome.ended - terminated >= GRACE_S - 0.5, outcome
    assert gateway.wait(60) == 0
    until(lambda: not any(alive(pid) for pid in copies), 30, "the copies stopped")
    log = gateway.output()
    assert "draining" in log and "the grace period is over: ending 4 request(s)" in log
