"""One request to one copy: a turn (admission), a copy (router), the HTTP exchange, all under a deadline.

A copy that cannot be reached, or that refused the request before any work (it is shutting down, loading or
full: its answer says so), is skipped for another; any other request that reached a copy is never sent twice,
since it may be running, unless its copy answers in frames: then it is resumed where it stopped when that copy
dies (pier.runtime.resume). Leaving the exchange closes the upstream request, which stops the copy's work.
`stop()` (the gateway's drain is over) ends every wait at once with ServiceUnavailable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx

from pier.backends.base import CopyStatus
from pier.errors import REFUSED_HEADER
from pier.runtime import resume
from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.errors import InvocationError, ModelError, Origin, ServiceUnavailable
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.router import Lease, Router
from pier.runtime.settings import RuntimeSettings
from pier.runtime.target import Target
from pier.runtime.upstream import CopyUnreachable, Upstream

log = logging.getLogger(__name__)
MAX_ROUTERS = 256  # idle routers of components beyond this many are dropped


@dataclass(frozen=True)
class Call:
    """One request on its way to a copy."""

    endpoint: str
    target: Target
    path: str
    body: bytes
    headers: Mapping[str, str]
    prefix: tuple[str, ...]  # see pier.runtime.prefix
    deadline: float | None  # event-loop time; None leaves it to the copy's own deadline
    deadline_s: float | None  # the same, as the number of seconds users configured
    retarget: Callable[[], Awaitable[Target]] | None = None  # the copies now, to resume on a replacement


@dataclass(frozen=True)
class Exchange:
    origin: Origin
    response: httpx.Response  # status and headers arrived; the body is still to be read
    resumable: resume.Resumable | None = None  # a framed answer: its body comes through it, across copies


class StreamEnded(Exception):
    """The copy's answer stopped short after it had begun: out of time, the connection broke (and the request
    could not be resumed), or the gateway is shutting down."""

    def __init__(self, error: InvocationError, code: StreamErrorCode) -> None:
        super().__init__(error.message)
        self.error = error
        self.code = code


class Forwarder:
    def __init__(self, settings: RuntimeSettings, client: httpx.AsyncClient | None = None) -> None:
        self.settings = settings
        self.admission = Admission(AdmissionLimits(settings.queue, settings.queue_timeout_s))
        self.upstream = Upstream(client, connect_timeout_s=settings.connect_timeout_s)
        self._routers: dict[str, Router] = {}
        self.casualties = resume.Casualties(settings.resume)
        self.stopping = False
        self._waits: set[asyncio.Timeout] = set()
        self._framed: set[tuple[str, int | None]] = set()  # copies (id, pid) that answered in frames

    async def aclose(self) -> None:
        await self.upstream.aclose()

    @asynccontextmanager
    async def exchange(self, call: Call) -> AsyncIterator[Exchange]:
        """A turn, a copy and its answer's status and headers, all held until the block ends."""
        ready = call.target.ready()
        if not ready:
            raise call.target.unavailable(call.endpoint)
        limit = len(ready) * self.settings.per_copy_concurrency
        async with self.admission.turn(call.target.component, limit, self._wait_s(call)):
            router = self.router(call.target.component)
            tried: list[str] = []
            if killed := self.casualties.condemned(call):  # it took copies down: keep it from the others
                origin = self.origin_of(call, killed[-1].copy_id)
                raise resume.poisoned(call, killed, origin, self.settings.resume.poison_memory_s)
            headers = {**call.headers, **resume.asks(self.settings.resume)}
            while (lease := router.pick(call.target.copies, call.prefix, exclude=tried)) is not None:
                with lease:
                    copy_id = lease.copy.copy_id
                    tried.append(copy_id)
                    origin = self.origin_of(call, copy_id)
                    try:
                        with self._model_errors(origin, call):
                            async with self.deadline(call):
                                response = await self._send(lease.copy, call, headers)
                    except CopyUnreachable as error:
                        log.warning("%s; trying another copy", error)
                        continue
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
                    if REFUSED_HEADER in response.headers and _untried(call, tried):
                        # Refused before any work (shutting down, loading, full): safe to run elsewhere.
                        log.info("copy %s refused the request (%s); trying another copy", copy_id,
                                 response.headers[REFUSED_HEADER])
                        await response.aclose()
                        continue
                    try:
                        yield Exchange(origin, response)
                    finally:
                        await response.aclose()
                    return
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
        try:
            while True:
                # The timeout wraps the wait only, never a yield: the consumer's time is not the copy's.
                async with self.deadline(call):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    return
                yield chunk
        except TimeoutError:
            if self.stopping:
                raise StreamEnded(self.shutting_down(), StreamErrorCode.BROKEN) from None
            raise StreamEnded(exchange.origin.timed_out(call.deadline_s or 0.0), StreamErrorCode.TIMEOUT) from None
        except httpx.TransportError as error:
            raise StreamEnded(exchange.origin.broken(error), StreamErrorCode.BROKEN) from None

    async def next_copy(self, call: Call, copies: Sequence[CopyStatus], exclude: Collection[str]) -> Lease | None:
        """A ready copy for `call` outside `exclude`, counted on until its lease is released (to resume a request
        on), or None when there is none now."""
        return self.router(call.target.component).pick(copies, call.prefix, exclude=exclude)

    async def _send(self, copy: CopyStatus, call: Call, headers: Mapping[str, str]) -> httpx.Response:
        """The copy's answer to `call`. A copy on pier's engine whose connection breaks before it answers died
        (or was gone, on a pooled connection): nothing reached the client, so another copy may run it."""
        try:
            return await self.upstream.send(copy, call.path, call.body, headers)
        except httpx.TransportError as error:
            if (copy.copy_id, copy.pid) in self._framed and self.settings.resume.attempts > 0:
                raise CopyUnreachable(f"copy {copy.copy_id} broke the connection before answering ({error!r})"
                                      ) from error
            raise

    @asynccontextmanager
    async def deadline(self, call: Call) -> AsyncIterator[None]:
        """One wait under `call`'s deadline (TimeoutError past it); `stop()` ends every such wait at once."""
        when = asyncio.get_running_loop().time() if self.stopping else call.deadline
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
        if len(self._routers) > MAX_ROUTERS:
            for name in [n for n, r in self._routers.items() if r.idle and n != component]:
                del self._routers[name]
        return self._routers.setdefault(component, Router(slack=self.settings.affinity_slack))

    def _wait_s(self, call: Call) -> float:
        wait = self.settings.queue_timeout_s
        if call.deadline is not None:
            wait = min(wait, call.deadline - asyncio.get_running_loop().time())
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
