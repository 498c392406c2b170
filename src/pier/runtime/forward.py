"""One request to one copy: a copy with room (admission and router), the HTTP exchange, all under a deadline.

A copy that cannot be reached, or that refused the request before any work (it is shutting down, loading or
full: its answer says so), is skipped for another; any other request that reached a copy is never sent twice,
since it may be running, unless its copy answers in frames: then it is resumed where it stopped when that copy
dies (pier.runtime.resume), on another copy with room. A copy that answers 429 (full after all: a race, or a
limit lower than the gateway knew) did none of the work either: the request goes to another copy with room,
waiting for one if need be, and when no other copy is ready it is Throttled, never a ModelError. Leaving the
exchange closes the upstream request, which stops the copy's work. `stop()` (the gateway's drain is over) ends
every wait at once with ServiceUnavailable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace

import httpx

from pier.backends.base import CopyStatus
from pier.channel.refusal import REFUSED_HEADER
from pier.errors import PierError
from pier.multi_model import CacheReport
from pier.runtime import resume
from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.call import OVERLOADED, Call, StreamEnded
from pier.runtime.errors import ModelError, Origin, ServiceUnavailable, Throttled
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.observer import InvocationObserver, Invoked
from pier.runtime.router import Lease, Router
from pier.runtime.settings import RuntimeSettings
from pier.runtime.upstream import CopyUnreachable, Upstream

log = logging.getLogger(__name__)
DEADLINE_SETTING = "PIER_INVOCATION_TIMEOUT_SECONDS"
@dataclass(frozen=True)
class Exchange:
    origin: Origin
    response: httpx.Response  # status and headers arrived; the body is still to be read
    resumable: resume.Resumable | None = None  # a framed answer: its body comes through it, across copies


@dataclass
class _Timing:
    started: float
    sent: float | None = None  # when the request last went to a copy
    model_cache: CacheReport | None = None  # how a multi-model copy found the request's model


class Forwarder:
    def __init__(self, settings: RuntimeSettings, client: httpx.AsyncClient | None = None,
                 observer: InvocationObserver | None = None) -> None:
        self.settings = settings
        self.observer = observer
        self.admission = Admission(AdmissionLimits(
            settings.queue, settings.queue_timeout_s, settings.affinity_slack, settings.per_copy_concurrency))
        self.upstream = Upstream(client, connect_timeout_s=settings.connect_timeout_s)
        self.casualties = resume.Casualties(settings.resume)
        self.stopping = False
        self._waits: set[asyncio.Timeout] = set()
        self._framed: set[tuple[str, int | None]] = set()  # copies (id, pid) that answered in frames

    async def aclose(self) -> None:
        await self.upstream.aclose()

    @asynccontextmanager
    async def exchange(self, call: Call) -> AsyncIterator[Exchange]:
        """A copy with room and its answer's status and headers, both held until the block ends; the observer
        hears how it went when it ends."""
        if self.observer is None:
            async with self._exchange(call, None) as exchange:
                yield exchange
            return
        timing = _Timing(asyncio.get_running_loop().time())
        status = 500
        try:
            async with self._exchange(call, timing) as exchange:
                status = exchange.response.status_code
                yield exchange
        except PierError as error:
            status = error.wire.sagemaker_status
            raise
        finally:
            self._observe(call, timing, status)

    def _observe(self, call: Call, timing: _Timing, status: int) -> None:
        assert self.observer is not None
        ended = asyncio.get_running_loop().time()
        sent = ended if timing.sent is None else timing.sent
        try:
            self.observer.invoked(Invoked(call.endpoint, call.target.variant, call.target.component, status,
                                          ended - sent, sent - timing.started, len(call.target.ready()),
                                          timing.model_cache))
        except Exception:  # metrics must never fail a request
            log.exception("recording an invocation's metrics failed")

    @asynccontextmanager
    async def _exchange(self, call: Call, timing: _Timing | None) -> AsyncIterator[Exchange]:
        if not call.target.ready():
            raise call.target.unavailable(call.endpoint)
        if killed := self.casualties.condemned(call):  # it took copies down: keep it from the others
            origin = self.origin_of(call, killed[-1].copy_id)
            raise resume.poisoned(call, killed, origin, self.settings.resume.poison_memory_s)
        headers = {**call.headers, **resume.asks(self.settings.resume)}
        loop = asyncio.get_running_loop()
        wait_until = loop.time() + self._wait_s(call)
        tried: list[str] = []
        full: list[str] = []  # copies that answered 429
        # The target's copies were resolved just now; a second try takes the latest the router was given.
        while (lease := await self._lease(call, None if tried else call.target.copies, tried,
                                          wait_until - loop.time())) is not None:
            with lease:
                copy_id = lease.copy.copy_id
                tried.append(copy_id)
                origin = self.origin_of(call, copy_id)
                try:
                    if timing is not None:
                        timing.sent = loop.time()
                    with self._model_errors(origin, call):
                        async with self.deadline(call):
                            response = await self._send(lease.copy, call, headers)
                except CopyUnreachable as error:
                    log.warning("%s; trying another copy", error)
                    continue
                if (report := CacheReport.of(response.headers)) is not None:
                    self.router(call.target.component).holds(copy_id, report.loaded)
                    if timing is not None:
                        timing.model_cache = report
                if resume.framed(response):  # a copy on pier's engine: resumable from here on
                    self._framed.add((copy_id, lease.copy.pid))
                    session = resume.Resumable(self, call, lease, origin, response, tried)
                    try:
                        with self._model_errors(origin, call):
                            head = await session.open()
                        yield Exchange(session.origin, head, session)
                    finally:
                        await session.aclose()
                    return
                if response.status_code == OVERLOADED or (REFUSED_HEADER in response.headers
                                                          and _untried(call, tried)):
                    # Refused before any work (full, shutting down, loading): safe to run elsewhere.
                    log.info("copy %s refused the request (%s %s); trying another copy", copy_id,
                             response.status_code, response.headers.get(REFUSED_HEADER, ""))
                    if response.status_code == OVERLOADED:
                        full.append(copy_id)
                    await response.aclose()
                    continue
                try:
                    yield Exchange(origin, response)
                finally:
                    await response.aclose()
                return
        if full:
            raise Throttled(
                f"Inference component {call.target.component} on endpoint {call.endpoint} is busy: copy "
                f"{', '.join(full)} answered that it is working on all it takes, and no other copy could take the "
                "request. Retry with backoff, or add copies."
            )
        raise ServiceUnavailable(
            f"No copy of {call.target.component} on endpoint {call.endpoint} could take the request (tried "
            f"{', '.join(tried)}); they may be restarting or shutting down. Retry shortly."
        )

    async def read(self, exchange: Exchange, call: Call) -> bytes:
        """The whole body within the deadline."""
        if exchange.resumable is not None:
            try:
                return b"".join([part async for part in exchange.resumable.body()])
            except StreamEnded as ended:
                raise ended.error from None
        with self._model_errors(exchange.origin, call):
            async with self.deadline(call):
                return await exchange.response.aread()

    async def relay(self, exchange: Exchange, call: Call) -> AsyncIterator[bytes]:
        """The body as it arrives; raises StreamEnded when it cannot finish."""
        chunks = exchange.response.aiter_raw() if exchange.resumable is None else exchange.resumable.body()
        loop = asyncio.get_running_loop()
        try:
            while True:
                # The timeout wraps the wait only, never a yield: the consumer's time is not the copy's.
                async with self.deadline(call):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    return
                if call.stream is not None:  # it flows: the next part has the whole deadline again
                    call.stream.moved(loop.time())
                yield chunk
        except TimeoutError:
            raise self.out_of_time(call, exchange.origin) from None
        except httpx.TransportError as error:
            raise StreamEnded(exchange.origin.broken(error), StreamErrorCode.BROKEN) from None

    async def next_copy(self, call: Call, copies: Sequence[CopyStatus] | None, exclude: Collection[str],
                        timeout_s: float | None = None) -> Lease | None:
        """A ready copy for `call` outside `exclude` with room (per-copy concurrency, as for any request), leased
        until released (to resume a request on); it waits behind earlier requests at most `timeout_s` (and the
        call's deadline). None when no copy outside `exclude` is ready at all; Throttled when none had room in
        time. `copies`: a fresh snapshot of the copies, or None for the latest the router was given."""
        wait = self._wait_s(call) if timeout_s is None else min(timeout_s, self._wait_s(call))
        return await self._lease(call, copies, exclude, wait)

    async def _lease(self, call: Call, copies: Sequence[CopyStatus] | None, exclude: Collection[str],
                     timeout_s: float) -> Lease | None:
        """admission.lease, its wait ended by the deadline and by `stop()` (TimeoutError)."""
        if self.stopping:
            raise self.shutting_down()
        route = call.route
        if route.pin is not None and route.pin in exclude:  # its session's copy failed it: any other will do
            route = replace(route, pin=None)
        try:
            async with self.deadline(call):
                return await self.admission.lease(call.target.component, copies, call.prefix, exclude=exclude,
                                                  timeout_s=timeout_s, route=route)
        except TimeoutError:
            if self.stopping:
                raise self.shutting_down() from None
            raise Throttled(
                f"Inference component {call.target.component} on endpoint {call.endpoint} stayed busy: no copy had "
                "room before the request's deadline. Retry with backoff or add copies.") from None

    async def _send(self, copy: CopyStatus, call: Call, headers: Mapping[str, str]) -> httpx.Response:
        """The copy's answer to `call`. A copy on pier's engine whose connection breaks before it answers died
        (or was gone, on a pooled connection): nothing reached the client, so another copy may run it."""
        try:
            return await self.upstream.send(copy, call.path, call.body, headers, method=call.method)
        except httpx.TransportError as error:
            if (copy.copy_id, copy.pid) in self._framed and self.settings.resume.attempts > 0:
                raise CopyUnreachable(f"copy {copy.copy_id} broke the connection before answering ({error!r})"
                                      ) from error
            raise

    def out_of_time(self, call: Call, origin: Origin) -> StreamEnded:
        """How a stream that ran out of time ends: at the gateway's drain (StreamBroken, a service's end), or at
        the limit of `call`'s deadline it hit, named with the setting that raises it."""
        if self.stopping:
            return StreamEnded(self.shutting_down(), None)
        if call.stream is not None:
            error = origin.stream_timed_out(call.stream.limit(), call.stream, DEADLINE_SETTING)
            return StreamEnded(error, StreamErrorCode.TIMEOUT)
        return StreamEnded(origin.timed_out(call.deadline_s or 0.0), StreamErrorCode.TIMEOUT)

    @asynccontextmanager
    async def deadline(self, call: Call) -> AsyncIterator[None]:
        """One wait under `call`'s deadline (TimeoutError past it); `stop()` ends every such wait at once."""
        when = asyncio.get_running_loop().time() if self.stopping else call.due()
        async with asyncio.timeout_at(when) as wait:
            self._waits.add(wait)
            try:
                yield
            finally:
                self._waits.discard(wait)

    def stop(self) -> None:
        """The gateway is shutting down: every request waiting on a copy ends now, in its protocol."""
        self.stopping = True
        now = asyncio.get_running_loop().time()
        for wait in list(self._waits):
            wait.reschedule(now)

    def shutting_down(self) -> ServiceUnavailable:
        return ServiceUnavailable(
            "The gateway is shutting down and ended this request before it was complete; retry it once the "
            "gateway is back (or on another one)."
        )

    @contextmanager
    def _model_errors(self, origin: Origin, call: Call) -> Iterator[None]:
        """model_errors(), but a wait that stop() ended says the gateway is shutting down."""
        try:
            with model_errors(origin, call):
                yield
        except ModelError:
            if self.stopping:
                raise self.shutting_down() from None
            raise

    def router(self, component: str) -> Router:
        return self.admission.router(component)

    def _wait_s(self, call: Call) -> float:
        wait = self.settings.queue_timeout_s
        due = call.due()
        if due is not None:
            wait = min(wait, due - asyncio.get_running_loop().time())
        return wait

    def origin_of(self, call: Call, copy_id: str) -> Origin:
        return Origin(call.endpoint, call.target.variant, copy_id, self.settings.region, self.settings.account)


def _untried(call: Call, tried: list[str]) -> bool:
    return any(copy.copy_id not in tried for copy in call.target.ready())


@contextmanager
def model_errors(origin: Origin, call: Call) -> Iterator[None]:
    """A copy that runs out of time or drops the connection before its answer began is a ModelError."""
    try:
        yield
    except TimeoutError:
        raise origin.timed_out(call.deadline_s or 0.0) from None
    except httpx.TransportError as error:
        raise origin.broken(error) from None
