"""Asynchronous inference: the requests InvokeEndpointAsync queued (pier.async_inference.queue) run on their endpoint's
copies, through the same forwarding as InvokeEndpoint (admission, routing, resuming on another copy) but under their
own InvocationTimeoutSeconds (15 minutes by default, as on AWS) instead of the real-time 60 s, which the copy is told
too (X-Pier-Timeout-Seconds). Each answer is written to its OutputLocation, each failure (the model's error, an
expired request, an unreadable input) to its FailureLocation with the reason, then the request leaves the queue.

Each second the dispatcher starts the oldest waiting requests while the endpoint's ready copies have room
(MaxConcurrentInvocationsPerInstance each; the gateway's per-copy concurrency when unset), fails those past their
RequestTTLSeconds, records the backlog metrics (recorder.backlog), and wakes an autoscaled variant at zero instances
(pier's scale from zero, as for inference components; AWS waits for an alarm on HasBacklogWithoutCapacity). Requests
no copy could take (none ready, all busy, the gateway stopping) wait again rather than fail.

Only the leader dispatches. Each lead takes requests under a claim of its own and writes each answer and failure
owned by its request (`storage.write_once`), so a request is answered once whichever gateway dies and wherever in
its life: `takeover.py` says what a new leader does with each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import httpx

from pier import storage
from pier.async_inference.notification import AsyncOutcome, notify
from pier.async_inference.queue import AsyncQueue, AsyncRequest
from pier.async_inference.takeover import FOUND, before_running
from pier.autoscaling.recorder import Recorder
from pier.autoscaling.resource import resource_of
from pier.autoscaling.scaler import Scaler
from pier.backends.base import CopyState, CopyStatus
from pier.channel.headers import TIMEOUT_HEADER
from pier.channel.prefix import request_prefix
from pier.control.records import EndpointRecord
from pier.control.resource_store import ResourceStore, UnreadableRecord
from pier.control.workload import Workload
from pier.runtime.attempts import NOT_TAKEN, Call, answer_of
from pier.runtime.errors import InvocationError, as_invocation_error
from pier.runtime.invocation import CUSTOM_ATTRIBUTES, INFERENCE_ID
from pier.runtime.invoke import RuntimeService
from pier.runtime.routing_strategy import request_routing
from pier.runtime.target import Target, resolve_target

log = logging.getLogger("pier.async")
TICK_S = 1.0
Work = Callable[[AsyncRequest], Coroutine[Any, Any, None]]
TIMEOUT_SETTING = "the request's InvocationTimeoutSeconds (InvokeEndpointAsync; at most 3600, 900 when not given)"


@dataclass(frozen=True)
class AsyncInstances:
    """An asynchronous endpoint's instances now."""

    desired: int  # instances (copies) its variants ask for
    ready: int  # copies ready to take requests


def free_slots(instances: AsyncInstances, per_instance: int, running: int) -> int:
    """How many more requests may start now: room on the ready copies, less those already running."""
    return max(instances.ready * per_instance - running, 0)


def expired(request: AsyncRequest, now: float) -> bool:
    return now >= request.expires


def expiry_reason(request: AsyncRequest, now: float) -> str:
    return (f"The request expired: it waited {now - request.received:.0f} s in the queue of endpoint "
            f"{request.endpoint}, past its RequestTTLSeconds ({request.ttl_s:.0f} s), with no copy free to run it. "
            "Add instances (or autoscale on ApproximateBacklogSizePerInstance), or send it with a longer "
            "RequestTTLSeconds.")


class AsyncInference:
    def __init__(self, queue: AsyncQueue, state: ResourceStore, runtime: RuntimeService,
                 copies: Callable[[Workload], list[CopyStatus]], recorder: Recorder, scaler: Scaler, *,
                 clock: Callable[[], float] = time.time, relay: str | None = None) -> None:
        self.queue = queue
        self.state = state
        self.runtime = runtime
        self.copies = copies
        self.recorder = recorder
        self.scaler = scaler
        self.clock = clock
        self.relay = relay  # PIER_ASYNC_NOTIFICATION_URL: where notifications for SNS topics go (None: logged only)
        self._running: dict[str, tuple[str, asyncio.Task[None]]] = {}  # request id -> (endpoint, its task)
        self._notices: set[asyncio.Task[None]] = set()  # notifications on their way, apart: they hold no slot
        self._ran: set[str] = set()  # requests started that ran under an earlier claim (looked for first)
        self.claim = uuid.uuid4().hex  # this lead's: a new one each run()
        self._wake = asyncio.Event()
        self._client = httpx.AsyncClient()

    def poke(self) -> None:
        """A request was queued: dispatch now rather than at the next tick."""
        self._wake.set()

    async def run(self) -> None:
        """Dispatch until cancelled; then the requests running wait again, for the next start (or leader)."""
        self.claim = uuid.uuid4().hex
        answered = await asyncio.to_thread(self.queue.answered_before)
        restarted = await asyncio.to_thread(self.queue.requeue_running)
        await asyncio.to_thread(self.queue.read_ttls)
        if answered:
            log.info("async inference: %d request(s) answered before the last leader stopped are notified",
                     len(answered))
        for request in answered:
            self._notice(self._announce(request))
        if restarted:
            log.info("async inference: %d request(s) that were running when the last leader stopped wait again "
                     "(each is looked for at its OutputLocation before it runs)", restarted)
        try:
            while True:
                self._wake.clear()
                try:
                    self._dispatch()
                except Exception:
                    log.exception("async inference: dispatching failed; trying again")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), TICK_S)
        finally:
            await self._stop()

    async def _stop(self) -> None:
        tasks = [task for _, task in self._running.values()] + list(self._notices)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._client.aclose()

    # ---- dispatching

    def _dispatch(self) -> None:
        now = self.clock()
        backlog = self.queue.backlog()
        endpoints = {r.name: r for r in self._async_endpoints()}
        for name in set(endpoints) | set(backlog):
            record = endpoints.get(name)
            queued, _, oldest = backlog.get(name, (0, 0, None))
            running = sum(1 for endpoint, _ in self._running.values() if endpoint == name)
            if record is None:
                self._start_all(name, self._gone)  # its endpoint was deleted, or is no longer asynchronous
                continue
            instances = self._instances(record)
            self.recorder.backlog(name, queued + running, instances.desired, now - oldest if oldest else 0.0,
                                  queued + running > 0 and instances.ready == 0)
            if queued and instances.desired == 0:
                self._wake_variants(record)
            config = record.async_inference
            assert config is not None
            free = free_slots(instances, config.max_concurrent or self.runtime.settings.per_copy_concurrency, running)
            for waiting in self.queue.pending(name) if queued else []:
                if now >= waiting.expires:
                    self._start(waiting.id, name, self._expire, waiting.ran)
                elif free > 0:
                    self._start(waiting.id, name, self._run, waiting.ran)
                    free -= 1

    def _async_endpoints(self) -> list[EndpointRecord]:
        records, _ = self.state.endpoints.scan()
        return [r for r in records if r.async_inference is not None and r.status != "Deleting"]

    def _instances(self, record: EndpointRecord) -> AsyncInstances:
        ready = sum(1 for v in record.variants
                    for c in self.copies(v.workload(record.name)) if c.state is CopyState.READY)
        return AsyncInstances(sum(v.instance_count for v in record.variants), ready)

    def _wake_variants(self, record: EndpointRecord) -> None:
        for variant in record.variants:
            try:
                self.scaler.wake(resource_of(f"endpoint/{record.name}/variant/{variant.name}"))
            except Exception:
                log.exception("async inference: waking %s/%s failed", record.name, variant.name)

    def _start_all(self, endpoint: str, work: Work) -> None:
        for waiting in self.queue.pending(endpoint):
            self._start(waiting.id, endpoint, work, waiting.ran)

    def _start(self, id: str, endpoint: str, work: Work, ran: bool = False) -> None:
        if id in self._running or not self.queue.start(id, self.claim):
            return
        if ran:
            self._ran.add(id)
        task = asyncio.create_task(self._read_then(id, work), name=f"async {id}")
        self._running[id] = (endpoint, task)
        task.add_done_callback(lambda _: self._ended(id))

    async def _read_then(self, id: str, work: Work) -> None:
        """The request read whole (its payload may be 128 KB) off the event loop, then worked on."""
        try:
            request = await asyncio.to_thread(self.queue.get, id)
            found = request is not None and id in self._ran and await asyncio.to_thread(self._written, request)
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.to_thread(self.queue.release, id, self.claim, id in self._ran))
            raise
        if request is None:
            return
        if found:
            log.info("async inference %s was answered before its leader stopped: not run again",
                     request.inference_id)
            if await asyncio.to_thread(self.queue.answered, id, self.claim):
                await self._announce(request)
            return
        await work(request)

    def _written(self, request: AsyncRequest) -> bool:
        """Whether a request that ran before has its answer at its OutputLocation, written for it."""
        try:
            owner = storage.written_by(request.output_location)
        except storage.StorageError as error:
            log.warning("async inference %s: its earlier answer could not be looked for (%s); it runs again",
                        request.inference_id, error)
            return False
        return before_running(request.id, True, owner) == FOUND

    async def _announce(self, request: AsyncRequest) -> None:
        """An answer written and recorded by an earlier run, not yet notified: removed, and notified by whoever
        removed it (so once at most), with the answer as it was written."""
        if not await asyncio.to_thread(self.queue.remove_answered, request.id):
            return
        answer, kind = None, None
        try:
            answer = await asyncio.to_thread(storage.read, request.output_location,
                                             self.runtime.settings.max_payload_bytes)
            kind = await asyncio.to_thread(storage.content_type, request.output_location)
        except storage.StorageError as error:
            log.warning("async inference %s: its answer could not be read back for its notification (%s)",
                        request.inference_id, error)
        await self._notify(request, AsyncOutcome(True, kind, answer))

    def _ended(self, id: str) -> None:
        self._running.pop(id, None)
        self._ran.discard(id)
        self._wake.set()  # a slot is free

    # ---- one request

    async def _run(self, request: AsyncRequest) -> None:
        try:
            body = (request.body.encode("latin-1") if request.body is not None
                    else await asyncio.to_thread(self._input, str(request.input_location)))
            answer, content_type = await self._invoke(request, body)
            recorded = await asyncio.to_thread(self._deliver, request, answer, content_type)
        except asyncio.CancelledError:
            await asyncio.shield(asyncio.to_thread(self.queue.release, request.id, self.claim))
            raise
        except NOT_TAKEN as error:  # the attempt loop's rule: no copy did any of the work, so it waits again
            if not self.runtime.forwarder.stopping:
                log.info("async inference %s waits again: %s", request.inference_id, error.message)
            await asyncio.to_thread(self.queue.release, request.id, self.claim, request.id in self._ran)
            return
        except Exception as error:
            await self._fail(request, _reason(error))
            return
        if not recorded:
            log.warning("async inference %s: another run has taken it since this one started (this gateway no "
                        "longer leads, or was stopping); that run records and notifies it", request.inference_id)
            return
        log.info("async inference %s done: %s", request.inference_id, request.output_location)
        if await asyncio.to_thread(self.queue.remove_answered, request.id):
            await self._notify(request, AsyncOutcome(True, content_type, answer))

    def _deliver(self, request: AsyncRequest, answer: bytes, content_type: str | None) -> bool:
        """The answer written once (owned by its request: written by an earlier or a rival run of it, it is left as
        it is), then recorded under this lead's claim; False when the claim no longer holds it. On its own thread: a
        stop meanwhile releases the request, the thread goes on, its record is refused, and the next run finds the
        answer written (takeover.py). A Filename naming an earlier caller's answer is replaced: what counts is the
        owner, not the name."""
        if not storage.write_once(request.output_location, answer, content_type, request.kms_key, owner=request.id):
            log.info("async inference %s: its answer was written by an earlier run; left as it is",
                     request.inference_id)
        return self.queue.answered(request.id, self.claim)

    def _input(self, url: str) -> bytes:
        """The payload, refused unread when no copy would take it: an object of gigabytes (AWS's asynchronous
        endpoints take up to 1 GB) must not be held in the gateway's memory only for the copy to answer 413."""
        limit = self.runtime.settings.max_payload_bytes
        try:
            return storage.read(url, limit=limit)
        except storage.TooLarge as error:
            raise storage.StorageError(
                f"{error} A request to pier's copies may be at most {limit} bytes (SageMaker's real-time limit, which "
                "pier's copies keep for asynchronous requests too): split the input over several requests.") from None

    async def _invoke(self, request: AsyncRequest, body: bytes) -> tuple[bytes, str | None]:
        forwarder = self.runtime.forwarder

        def resolve() -> Awaitable[Target]:
            return resolve_target(self.runtime.resolve, request.endpoint, None, None)

        target = await resolve_target(self.runtime.resolve, request.endpoint, None, None)
        now = asyncio.get_running_loop().time()
        call = Call(request.endpoint, target, "/invocations", body, _headers(request), request_prefix(body),
                    now + request.timeout_s, request.timeout_s, retarget=resolve,
                    route=request_routing(target.routing, body, None), deadline_setting=TIMEOUT_SETTING)
        async with answer_of(forwarder, call) as answer:
            body = await answer.read()
            if not answer.head.is_success:
                raise answer.error(body)
            return body, answer.head.headers.get("content-type")

    async def _expire(self, request: AsyncRequest) -> None:
        await self._fail(request, expiry_reason(request, self.clock()))

    async def _gone(self, request: AsyncRequest) -> None:
        await self._fail(request, f"Endpoint {request.endpoint} was deleted (or updated to a config without "
                                  "AsyncInferenceConfig) before this request ran.")

    async def _fail(self, request: AsyncRequest, reason: str) -> None:
        log.warning("async inference %s failed: %s", request.inference_id, reason)
        try:
            await asyncio.to_thread(storage.write_once, request.failure_location, reason.encode(), "text/plain",
                                    request.kms_key, owner=request.id)
        except storage.StorageError as error:
            log.error("async inference %s: its failure could not be written either: %s", request.inference_id, error)
        if await asyncio.to_thread(self.queue.failed, request.id, self.claim):
            await self._notify(request, AsyncOutcome(False, reason=reason))

    async def _notify(self, request: AsyncRequest, outcome: AsyncOutcome) -> None:
        """Sent on a task of its own: a topic that answers slowly (up to DELIVERY_TIMEOUT_S) would otherwise keep
        the request counted as running, and the copy's slot from the next request, after its answer is written."""
        try:
            record = self.state.endpoints.get(request.endpoint)
        except UnreadableRecord:
            return
        if record is None or record.async_inference is None:
            return
        self._notice(notify(record.async_inference.OutputConfig.NotificationConfig, request, outcome,
                            self.runtime.settings.region, self._client, self.relay))

    def _notice(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, name="async notice")
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)


def _headers(request: AsyncRequest) -> dict[str, str]:
    """What the copy is told, as for InvokeEndpoint, with the request's own time limit."""
    headers = {"X-Amzn-RequestId": request.id, INFERENCE_ID: request.inference_id,
               TIMEOUT_HEADER: f"{request.timeout_s:g}"}
    for name, value in (("Content-Type", request.content_type), ("Accept", request.accept),
                        (CUSTOM_ATTRIBUTES, request.custom_attributes)):
        if value is not None:
            headers[name] = value
    return headers


def _reason(error: Exception) -> str:
    if isinstance(error, storage.StorageError):
        return str(error)
    failure: InvocationError = as_invocation_error(error)
    if failure is not error:
        log.error("async inference failed unexpectedly", exc_info=error)
    return failure.message
