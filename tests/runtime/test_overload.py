"""Overload is a throttle, not a model error: many concurrent requests through boto3 and the openai client on
a component with small copies and a small queue. Every answer is a success or a ThrottlingException / 429;
never a 424; and no copy ever works on more than the concurrency it reports."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.settings import RuntimeSettings
from tests.runtime.servers import CountingCopy, Gateway, gateway, headers_of, wait_until
from tests.runtime.servers import runtime_client as client
from tests.sockets import serving

OK = "ok"
THROTTLED = (429, "ThrottlingException")
BODY = json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 2}})


@dataclass
class Fleet:
    gw: Gateway
    copies: dict[str, CountingCopy]


@contextmanager
def fleet(reported: dict[str, int], settings: RuntimeSettings, **behaviour: object) -> Iterator[Fleet]:
    """A gateway whose endpoint `llm` has one counting copy per entry of `reported` (copy id -> the concurrency
    its backend reports), each held until the shared gate opens."""
    gate = threading.Event()
    counting = {copy_id: CountingCopy(gate=gate, **behaviour) for copy_id in reported}  # type: ignore[arg-type]
    with ExitStack() as stack:
        urls = {copy_id: stack.enter_context(serving(c.app())) for copy_id, c in counting.items()}
        gw = stack.enter_context(gateway(settings))
        gw.route("llm", [CopyStatus(copy_id, "ic", CopyState.READY, url=urls[copy_id], pid=1, concurrency=n)
                         for copy_id, n in reported.items()])
        try:
            yield Fleet(gw, counting)
        finally:
            gate.set()


def boto3_call(url: str) -> object:
    try:
        client(url, attempts=0).invoke_endpoint(EndpointName="llm", Body=BODY, ContentType="application/json")
        return OK
    except ClientError as error:
        response = error.response
        return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def openai_call(url: str) -> object:
    api = openai.OpenAI(base_url=url + "/endpoints/llm/v1", api_key="unused", max_retries=0, timeout=30)
    try:
        api.chat.completions.create(model="anything", messages=[{"role": "user", "content": "hi"}])
        return OK
    except openai.APIStatusError as error:
        body = error.response.json()["error"]
        assert error.response.headers.get("retry-after") == "1" and body["type"] == "rate_limit_error"
        return error.status_code, "ThrottlingException" if error.status_code == 429 else body.get("code")


def flood(fleet_: Fleet, call: Callable[[str], object], requests: int, admitted: int) -> list[object]:
    """`requests` at once while the copies hold what they took; once the rest have been answered or queued,
    the copies let go. Returns every outcome."""
    admission = fleet_.gw.service.forwarder.admission
    with ThreadPoolExecutor(requests) as pool:
        futures: list[Future[object]] = [pool.submit(call, fleet_.gw.url) for _ in range(requests)]
        running = lambda: sum(c.in_flight for c in fleet_.copies.values())  # noqa: E731
        assert wait_until(lambda: running() + admission.waiting("ic") + sum(f.done() for f in futures) == requests,
                          timeout=20), (running(), admission.waiting("ic"))
        assert running() == admitted  # what the copies report they take, no more
        next(iter(fleet_.copies.values())).gate.set()  # type: ignore[union-attr]
        return [f.result(30) for f in futures]


@pytest.mark.parametrize("call", [boto3_call, openai_call], ids=["boto3", "openai"])
def test_overload_is_throttled_never_a_model_error(call: Callable[[str], object]) -> None:
    settings = RuntimeSettings(queue=2, queue_timeout_s=20)
    with fleet({"a": 2, "b": 1}, settings) as f:
        outcomes = flood(f, call, requests=12, admitted=3)
    assert sorted(map(str, outcomes)) == sorted(map(str, [OK] * 5 + [THROTTLED] * 7))  # 3 running + 2 queued
    assert (f.copies["a"].peak, f.copies["b"].peak) == (2, 1)
    assert f.copies["a"].served + f.copies["b"].served == 5


def test_a_queued_request_that_waits_too_long_is_throttled() -> None:
    with fleet({"a": 1}, RuntimeSettings(queue=4, queue_timeout_s=0.3)) as f:
        holder = threading.Thread(target=boto3_call, args=(f.gw.url,))
        holder.start()
        assert wait_until(lambda: f.copies["a"].in_flight == 1)
        started = time.monotonic()
        with pytest.raises(ClientError) as raised:
            client(f.gw.url, attempts=0).invoke_endpoint(EndpointName="llm", Body=BODY)
        assert time.monotonic() - started < 3
        response = raised.value.response
        assert (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]) == THROTTLED
        assert "no copy had room within 0.3 s" in response["Error"]["Message"]
        f.copies["a"].gate.set()  # type: ignore[union-attr]
        holder.join(10)
    assert f.copies["a"].served == 1 and f.copies["a"].peak == 1


@pytest.mark.parametrize("refused_header", [True, False], ids=["model-server", "handler's-own-429"])
def test_a_copy_that_takes_less_than_reported_is_a_throttle_or_another_copy(refused_header: bool) -> None:
    with fleet({"small": 3}, RuntimeSettings(queue=4), limit=1, refused_header=refused_header) as f:
        holder = threading.Thread(target=boto3_call, args=(f.gw.url,))
        holder.start()
        assert wait_until(lambda: f.copies["small"].in_flight == 1)
        # The gateway believes the copy has room; its 429 is a throttle for the client, never a 424.
        assert boto3_call(f.gw.url) == THROTTLED
        assert openai_call(f.gw.url) == THROTTLED
        assert f.copies["small"].refused == 2
        f.copies["small"].gate.set()  # type: ignore[union-attr]
        holder.join(10)
    gate = threading.Event()
    small, roomy = CountingCopy(gate=gate, limit=1, refused_header=refused_header), CountingCopy(gate=gate)
    with serving(small.app()) as small_url, serving(roomy.app()) as roomy_url, gateway() as gw:
        # "a-..." sorts first, so the copy chooser tries the small copy first while both are idle.
        gw.route("llm", [CopyStatus("a-small", "ic", CopyState.READY, url=small_url, pid=1, concurrency=3),
                         CopyStatus("b-roomy", "ic", CopyState.READY, url=roomy_url, pid=1, concurrency=3)])
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(boto3_call, gw.url) for _ in range(4)]
            assert wait_until(lambda: small.in_flight + roomy.in_flight == 4)
            gate.set()
            assert [f.result(10) for f in futures] == [OK] * 4
        # The small copy took one and refused what the gateway sent it past that: those went to the other copy.
        assert small.served == 1 and roomy.served == 3 and small.refused >= 1


def test_boto3_retries_a_throttle_then_raises_throttling_exception_and_no_copy_saw_the_retries() -> None:
    with fleet({"a": 1}, RuntimeSettings(queue=0)) as f:
        holder = threading.Thread(target=boto3_call, args=(f.gw.url,))
        holder.start()
        assert wait_until(lambda: f.copies["a"].in_flight == 1)
        for mode in ("legacy", "standard"):  # legacy retries 429 by its status; standard by the code
            runtime = boto3.client(
                "sagemaker-runtime", endpoint_url=f.gw.url, region_name="us-east-1", aws_access_key_id="pier",
                aws_secret_access_key="pier", config=Config(retries={"total_max_attempts": 3, "mode": mode}))
            with pytest.raises(ClientError) as raised:
                runtime.invoke_endpoint(EndpointName="llm", Body=BODY)
            response = raised.value.response
            assert (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]) == THROTTLED
            assert response["ResponseMetadata"]["RetryAttempts"] == 2, mode
            assert headers_of(response)["retry-after"] == "1"
        with pytest.raises(ClientError) as streamed:
            client(f.gw.url, attempts=0).invoke_endpoint_with_response_stream(EndpointName="llm", Body=BODY)
        assert (streamed.value.response["ResponseMetadata"]["HTTPStatusCode"],
                streamed.value.response["Error"]["Code"]) == THROTTLED
        assert f.copies["a"].in_flight == 1 and f.copies["a"].refused == 0  # the throttled calls reached no copy
        f.copies["a"].gate.set()  # type: ignore[union-attr]
        holder.join(10)
    assert f.copies["a"].served == 1
