"""The asynchronous dispatcher's rules, on a real queue and file:// locations: how many requests start, what expires,
what is recorded, and an endpoint at zero instances woken."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pier.async_inference.dispatcher import AsyncInference, AsyncInstances, expired, free_slots
from pier.async_inference.queue import AsyncQueue, AsyncRequest
from pier.backends.base import CopyState, CopyStatus
from pier.control.records import EndpointRecord, VariantRecord
from pier.control.shapes import AsyncInferenceSpec
from pier.control.workload import Workload
from pier.runtime.invoke import RuntimeService
from pier.state_folder.store import Driver


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize(("ready", "per_instance", "running", "free"), [
    (0, 4, 0, 0), (1, 1, 0, 1), (1, 1, 1, 0), (2, 3, 1, 5), (1, 2, 5, 0),
])
def test_free_slots(ready: int, per_instance: int, running: int, free: int) -> None:
    assert free_slots(AsyncInstances(desired=max(ready, 1), ready=ready), per_instance, running) == free


def test_a_request_expires_at_its_ttl() -> None:
    queued = AsyncRequest("a", "a", "e", "s3://b/a.out", "s3://b/a-error.out", received=100.0, ttl_s=60,
                          timeout_s=900)
    assert not expired(queued, 159.9) and expired(queued, 160.0)


@dataclass
class Endpoints:
    records: list[EndpointRecord]

    def scan(self) -> tuple[list[EndpointRecord], list[Any]]:
        return self.records, []

    def get(self, name: str) -> EndpointRecord | None:
        return next((r for r in self.records if r.name == name), None)


@dataclass
class FakeState:
    endpoints: Endpoints


@dataclass
class Seen:
    backlog: list[tuple[Any, ...]] = field(default_factory=list)
    woken: list[str] = field(default_factory=list)

    def record(self, *args: Any) -> None:
        self.backlog.append(args)

    def wake(self, resource: Any) -> bool:
        self.woken.append(resource.resource_id)
        return True


def endpoint(tmp_path: Path, instances: int) -> EndpointRecord:
    config = AsyncInferenceSpec.model_validate({"OutputConfig": {"S3OutputPath": (tmp_path / "out").as_uri()},
                                                "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1}})
    return EndpointRecord(name="e", arn="arn", created=0.0, config_name="c", modified=0.0, status="InService",
                          variants=(VariantRecord(name="AllTraffic", instance_type="local",
                                                  instance_count=instances, model="m"),), async_inference=config)


def queued(tmp_path: Path, id: str, received: float) -> AsyncRequest:
    return AsyncRequest(id, id, "e", (tmp_path / "out" / f"{id}.out").as_uri(),
                        (tmp_path / "out" / f"{id}-error.out").as_uri(), received=received, ttl_s=60, timeout_s=900,
                        body="{}")


def dispatcher(tmp_path: Path, record: EndpointRecord, ready: int, seen: Seen, now: float,
               url: str = "http://127.0.0.1:9", driver: Driver | None = None) -> AsyncInference:
    copies = [CopyStatus(f"c{i}", "e/AllTraffic", CopyState.READY, url=url) for i in range(ready)]

    def copies_of(workload: Workload) -> list[CopyStatus]:
        return copies if workload == Workload.of_variant("e", "AllTraffic") else []

    recorder, scaler = type("R", (), {"backlog": seen.record})(), type("S", (), {"wake": seen.wake})()
    return AsyncInference(AsyncQueue.open(tmp_path, driver), FakeState(Endpoints([record])),  # type: ignore[arg-type]
                          RuntimeService(lambda *_: copies), copies_of, recorder, scaler,  # type: ignore[arg-type]
                          clock=lambda: now)


@pytest.mark.anyio
async def test_expired_requests_fail_with_the_reason_and_one_starts_per_free_slot(tmp_path: Path) -> None:
    seen = Seen()
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=seen, now=1000.0)
    for id, received in (("old", 900.0), ("a", 990.0), ("b", 995.0)):
        work.queue.add(queued(tmp_path, id, received))
    started: list[str] = []

    async def run(request: AsyncRequest) -> None:
        started.append(request.id)
        await asyncio.sleep(0.2)

    work._run = run  # type: ignore[method-assign]  # what a copy does is not under test here
    work._dispatch()
    await asyncio.sleep(0.1)
    reason = (tmp_path / "out" / "old-error.out").read_text()
    assert reason.startswith("The request expired: it waited 100 s in the queue of endpoint e, past its "
                             "RequestTTLSeconds (60 s)")
    assert started == ["a"]  # one copy, one request at a time (MaxConcurrentInvocationsPerInstance)
    assert seen.backlog == [("e", 3, 1, 100.0, False)]
    assert [r.id for r in work.queue.waiting("e")] == ["b"]
    await asyncio.sleep(0.2)
    assert seen.woken == []


@pytest.mark.anyio
async def test_a_backlog_at_zero_instances_wakes_the_variant_and_says_it_has_no_capacity(tmp_path: Path) -> None:
    seen = Seen()
    work = dispatcher(tmp_path, endpoint(tmp_path, 0), ready=0, seen=seen, now=1000.0)
    work.queue.add(queued(tmp_path, "a", 999.0))
    work._dispatch()
    assert seen.woken == ["endpoint/e/variant/AllTraffic"]
    assert seen.backlog == [("e", 1, 0, 1.0, True)]
    assert [r.id for r in work.queue.waiting("e")] == ["a"]  # waits for the copy, never fails for the lack of one


@pytest.mark.anyio
async def test_a_slow_notification_does_not_hold_the_copys_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """A topic that answers slowly (up to DELIVERY_TIMEOUT_S) must not keep the next request from the copy."""
    import pier.async_inference.dispatcher as module

    async def slow_notify(*_: Any, **__: Any) -> None:
        await asyncio.sleep(5)

    async def answer(request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        return b"ok", "text/plain"

    monkeypatch.setattr(module, "notify", slow_notify)
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    work._invoke = answer  # type: ignore[method-assign]
    for id in ("a", "b"):
        work.queue.add(queued(tmp_path, id, 999.0))
    work._dispatch()
    await asyncio.sleep(0.3)
    assert (tmp_path / "out" / "a.out").read_bytes() == b"ok"
    work._dispatch()  # a is answered; only its notification is still on its way
    await asyncio.sleep(0.3)
    assert (tmp_path / "out" / "b.out").read_bytes() == b"ok"
    await work._stop()


def slow_copy() -> Any:
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/invocations")
    async def invocations() -> dict[str, str]:
        await asyncio.sleep(5)
        return {}

    return app


@pytest.mark.anyio
async def test_a_request_out_of_time_says_to_raise_its_invocation_timeout(tmp_path: Path) -> None:
    """The knob is the request's own InvocationTimeoutSeconds, not the real-time deadline."""
    from tests.sockets import serving

    with serving(slow_copy()) as url:
        work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0, url=url)
        request = queued(tmp_path, "a", 999.0)
        work.queue.add(dataclasses.replace(request, timeout_s=1))
        work._dispatch()
        await asyncio.sleep(2)
        reason = (tmp_path / "out" / "a-error.out").read_text()
        await work._stop()
    assert "did not answer within 1.0 s" in reason
    assert "InvocationTimeoutSeconds" in reason and "invocation deadline" not in reason


@pytest.mark.anyio
async def test_an_input_larger_than_a_copy_takes_fails_unread_with_what_to_do(tmp_path: Path) -> None:
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (work.runtime.settings.max_payload_bytes + 1))
    request = dataclasses.replace(queued(tmp_path, "a", 999.0), body=None, input_location=big.as_uri())
    work.queue.add(request)
    work._dispatch()
    await asyncio.sleep(0.5)
    reason = (tmp_path / "out" / "a-error.out").read_text()
    await work._stop()
    assert f"it is {big.stat().st_size} bytes" in reason
    assert "split the input over several requests" in reason


@pytest.mark.anyio
async def test_a_tick_reads_only_the_requests_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dispatching runs on the event loop each second: reading every queued request whole (inline bodies of up to
    128 KB) stalled the gateway for seconds with a thousand queued. Only those started (or expired) are read."""
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    for i in range(50):
        work.queue.add(queued(tmp_path, f"r{i:02d}", 999.0 + i / 100))
    work.queue.add(dataclasses.replace(queued(tmp_path, "old", 900.0), ttl_s=60))
    read: list[str] = []
    from_json = AsyncRequest.from_json.__func__  # type: ignore[attr-defined]

    def counted(cls: type[AsyncRequest], text: str) -> AsyncRequest:
        request: AsyncRequest = from_json(cls, text)
        read.append(request.id)
        return request

    monkeypatch.setattr(AsyncRequest, "from_json", classmethod(counted))
    started: list[str] = []

    async def run(request: AsyncRequest) -> None:
        started.append(request.id)

    work._run = run  # type: ignore[method-assign]
    work._dispatch()
    await asyncio.sleep(0.3)
    assert started == ["r00"] and (tmp_path / "out" / "old-error.out").is_file()
    assert sorted(read) == ["old", "r00"]
    await work._stop()


@pytest.mark.anyio
async def test_answers_and_failures_are_written_with_the_kms_key(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import pier.async_inference.dispatcher as module

    written: list[tuple[str, str | None]] = []

    def write(url: str, data: bytes, content_type: str | None = None, kms_key: str | None = None, *,
              owner: str) -> bool:
        written.append((url.rsplit("/", 1)[1], kms_key))
        return True

    async def answer(request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        return b"ok", "text/plain"

    monkeypatch.setattr(module.storage, "write_once", write)
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    work._invoke = answer  # type: ignore[method-assign]
    work.queue.add(dataclasses.replace(queued(tmp_path, "a", 999.0), kms_key="alias/k"))
    work.queue.add(dataclasses.replace(queued(tmp_path, "old", 900.0), kms_key="alias/k"))
    work._dispatch()
    await asyncio.sleep(0.3)
    await work._stop()
    assert sorted(written) == [("a.out", "alias/k"), ("old-error.out", "alias/k")]


@pytest.mark.anyio
async def test_a_filename_naming_an_earlier_answer_still_runs(tmp_path: Path) -> None:
    """Issue 41: a request whose X-Amzn-SageMaker-Filename named an existing answer never ran (it was taken as
    'answered before a restart'), and its caller read the earlier caller's answer."""
    from pier.async_inference.accepted import accepted

    record = endpoint(tmp_path, 1)
    assert record.async_inference is not None
    asked: list[bytes] = []

    async def answer(request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        asked.append(body)
        return b"answer to " + body, "text/plain"

    work = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0)
    work._invoke = answer  # type: ignore[method-assign]
    for caller in (b"first", b"second"):
        request = accepted("e", {"X-Amzn-SageMaker-Filename": "answer.json"}, caller, record.async_inference, 999.0)
        assert request.output_location == (tmp_path / "out" / "answer.json").as_uri()
        work.queue.add(request)
        work._dispatch()
        await asyncio.sleep(0.3)
        assert (tmp_path / "out" / "answer.json").read_bytes() == b"answer to " + caller
    await work._stop()
    assert asked == [b"first", b"second"] and work.queue.backlog() == {}


@pytest.mark.anyio
async def test_a_request_answered_before_a_stop_is_not_run_again(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway stopping while an answer is written: the write ends, the queue records it answered, and the
    restarted gateway does not run it again (each answer is written once)."""
    import pier.async_inference.dispatcher as module

    write = module.storage.write_once

    def slow_write(*args: Any, **kwargs: Any) -> bool:
        time.sleep(0.3)
        return write(*args, **kwargs)

    asked: list[str] = []

    async def answer(request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        asked.append(request.id)
        return b"ok", "text/plain"

    monkeypatch.setattr(module.storage, "write_once", slow_write)
    work = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    work._invoke = answer  # type: ignore[method-assign]
    work.queue.add(queued(tmp_path, "a", 999.0))
    work._dispatch()
    await asyncio.sleep(0.1)  # the answer is being written
    await work._stop()
    await asyncio.sleep(0.4)
    assert (tmp_path / "out" / "a.out").read_bytes() == b"ok"
    work.queue.close()
    again = dispatcher(tmp_path, endpoint(tmp_path, 1), ready=1, seen=Seen(), now=1000.0)
    again._invoke = answer  # type: ignore[method-assign]
    running = asyncio.create_task(again.run())
    await asyncio.sleep(0.3)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert asked == ["a"] and again.queue.backlog() == {} and again.queue.get("a") is None


@dataclass
class Counted:
    """What a dispatcher did: requests sent to a copy, writes that landed, notifications sent."""

    asked: list[str] = field(default_factory=list)
    landed: list[str] = field(default_factory=list)
    notified: list[tuple[str, bool, bytes | None]] = field(default_factory=list)


def counting(monkeypatch: pytest.MonkeyPatch, work: AsyncInference, counted: Counted, write_s: float = 0.0) -> None:
    import pier.async_inference.dispatcher as module

    write = module.storage.write_once

    def landed(url: str, *args: Any, **kwargs: Any) -> bool:
        time.sleep(write_s)
        if written := write(url, *args, **kwargs):
            counted.landed.append(url.rsplit("/", 1)[1])
        return written

    async def notify(config: Any, request: AsyncRequest, outcome: Any, *_: Any) -> None:
        counted.notified.append((request.id, outcome.succeeded, outcome.answer))

    async def answer(request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        counted.asked.append(request.id)
        return b"answer of " + request.id.encode(), "text/plain"

    monkeypatch.setattr(module.storage, "write_once", landed)
    monkeypatch.setattr(module, "notify", notify)
    work._invoke = answer  # type: ignore[method-assign]


async def lead_for(work: AsyncInference, seconds: float) -> None:
    running = asyncio.create_task(work.run())
    await asyncio.sleep(seconds)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)


# Where in a request's life its leader was killed -9, and what the next leader then does: (sent to a copy, writes
# that land, notifications). "answered" by the dead leader: its answer was written and recorded, not notified (the
# row is removed before the notification is sent, so a row still there was never notified).
@pytest.mark.parametrize(("killed", "asked", "landed", "notified"), [
    ("queued", 1, 1, 1),
    ("running, nothing written", 1, 1, 1),
    ("running, its answer written, not recorded", 0, 0, 1),
    ("running, another caller's answer at its Filename", 1, 1, 1),
    ("answered, not notified", 0, 0, 1),
    ("removed, the notification unsent", 0, 0, 0),
])
@pytest.mark.anyio
async def test_a_new_leader_answers_each_request_once_wherever_the_last_one_died(
        tmp_path: Path, driver: Driver | None, monkeypatch: pytest.MonkeyPatch, killed: str, asked: int,
        landed: int, notified: int) -> None:
    import pier.storage

    record = endpoint(tmp_path, 1)
    dead = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0, driver=driver)
    request = queued(tmp_path, "a", 999.0)
    dead.queue.add(request)
    if killed != "queued":
        assert dead.queue.start("a", "dead leader")
    if "answer written" in killed or killed.startswith(("answered", "removed")):
        assert pier.storage.write_once(request.output_location, b"answer of a", owner="a")
    if "another caller" in killed:
        assert pier.storage.write_once(request.output_location, b"someone else's", owner="b")
    if killed.startswith(("answered", "removed")):
        assert dead.queue.answered("a", "dead leader")
    if killed.startswith("removed"):
        assert dead.queue.remove_answered("a")
    dead.queue.close()
    again = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0, driver=driver)
    counted = Counted()
    counting(monkeypatch, again, counted)
    await lead_for(again, 0.6)
    assert (len(counted.asked), len(counted.landed), len(counted.notified)) == (asked, landed, notified)
    assert (tmp_path / "out" / "a.out").read_bytes() == b"answer of a"
    assert not (tmp_path / "out" / "a-error.out").exists()
    assert all(answer == b"answer of a" for _, _, answer in counted.notified)
    assert again.queue.backlog() == {} and again.queue.answered_before() == []


@pytest.mark.anyio
async def test_a_leader_whose_lease_lapsed_mid_write_neither_writes_twice_nor_notifies(
        tmp_path: Path, driver: Driver | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old leader's loops are cancelled (its lease lapsed) while its thread writes an answer; the next leader
    takes the request at once. Of the two runs, one write lands and one notification is sent."""
    record = endpoint(tmp_path, 1)
    old, counted = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0, driver=driver), Counted()
    counting(monkeypatch, old, counted, write_s=0.5)  # the old leader's write is slow: it lands last
    old.queue.add(queued(tmp_path, "a", 999.0))
    old.claim = "old"
    old._dispatch()
    await asyncio.sleep(0.2)  # its answer is being written
    await old._stop()
    new = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0, driver=driver)
    counting(monkeypatch, new, counted)
    await lead_for(new, 1.0)
    assert counted.asked == ["a", "a"] and counted.landed == ["a.out"]
    assert [(id, ok) for id, ok, _ in counted.notified] == [("a", True)]
    assert new.queue.backlog() == {} and new.queue.get("a") is None


@pytest.mark.parametrize("killed", ["running, its answer written, not recorded", "answered, not notified"])
@pytest.mark.anyio
async def test_an_answer_a_new_leader_finds_is_notified_with_the_content_type_it_was_written_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed: str) -> None:
    import boto3
    from moto import mock_aws

    import pier.async_inference.dispatcher as module
    import pier.storage

    aws = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
    for name, value in aws.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    monkeypatch.setattr(pier.storage, "_client", None)
    notified: list[Any] = []

    async def notify(config: Any, request: AsyncRequest, outcome: Any, *_: Any) -> None:
        notified.append(outcome)

    monkeypatch.setattr(module, "notify", notify)
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="answers")
        record = endpoint(tmp_path, 1)
        request = dataclasses.replace(queued(tmp_path, "a", 999.0), output_location="s3://answers/out/a.out")
        dead = dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0)
        dead.queue.add(request)
        assert dead.queue.start("a", "dead leader")
        assert pier.storage.write_once(request.output_location, b'{"generated_text": "hi"}', "application/json",
                                       owner="a")
        if killed.startswith("answered"):
            assert dead.queue.answered("a", "dead leader")
        dead.queue.close()
        await lead_for(dispatcher(tmp_path, record, ready=1, seen=Seen(), now=1000.0), 0.6)
    monkeypatch.setattr(pier.storage, "_client", None)
    assert [(o.succeeded, o.content_type, o.answer) for o in notified] == [
        (True, "application/json", b'{"generated_text": "hi"}')]
