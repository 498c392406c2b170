"""One request to one copy: a copy with room (admission and router), the HTTP exchange, all under a deadline.

A copy that cannot be reached, or that refused the request before any work (it is shutting down, loading or
full: its answer says so), is skipped for another; any other request that reached a copy is never sent twice,
since it may be running. A copy that answers 429 (full after all: a race, or a limit lower than the gateway
knew) did none of the work either: the request goes to another copy with room, waiting for one if need be, and
when no other copy is ready it is Throttled, never a ModelError. Leaving the exchange closes the upstream
request, which stops the copy's work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx

from pier.errors import REFUSED_HEADER
from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.errors import ModelError, Origin, ServiceUnavailable, Throttled
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.router import Router
from pier.runtime.settings import RuntimeSettings
from pier.runtime.target import Target
from pier.runtime.upstream import CopyUnreachable, Upstream

log = logging.getLogger(__name__)
OVERLOADED = 429  # a copy's answer when it is already working on all it takes


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


@dataclass(frozen=True)
class Exchange:
    origin: Origin
    response: httpx.Response  # status and headers arrived; the body is still to be read


class StreamEnded(Exception):
    """The copy's answer stopped short after it had begun: out of time, or the connection broke."""

    def __init__(self, error: ModelError, code: StreamErrorCode) -> None:
        super().__init__(error.message)
        self.error = error
        self.code = code


class Forwarder:
    def __init__(self, settings: RuntimeSettings, client: httpx.AsyncClient | None = None) -> None:
        self.settings = settings
        self.admission = Admission(AdmissionLimits(
            settings.queue, settings.queue_timeout_s, settings.affinity_slack, settings.per_copy_concurrency))
        self.upstream = Upstream(client, connect_timeout_s=settings.connect_timeout_s)

    async def aclose(self) -> None:
        await self.upstream.aclose()

    @asynccontextmanager
    async def exchange(self, call: Call) -> AsyncIterator[Exchange]:
        """A copy with room and its answer's status and headers, both held until the block ends."""
        if not call.target.ready():
            raise call.target.unavailable(call.endpoint)
        loop = asyncio.get_running_loop()
        wait_until = loop.time() + self._wait_s(call)
        tried: list[str] = []
        full: list[str] = []  # copies that answered 429
        # The target's copies were resolved just now; a second try takes the latest the router was given.
        while (lease := await self.admission.lease(
                call.target.component, None if tried else call.target.copies, call.prefix, exclude=tried,
                timeout_s=wait_until - loop.time())) is not None:
            with lease:
                copy_id = lease.copy.copy_id
                tried.append(copy_id)
                origin = self._origin(call, copy_id)
                try:
                    with model_errors(origin, call):
                        async with asyncio.timeout_at(call.deadline):
                            response = await self.upstream.send(lease.copy, call.path, call.body, call.headers)
                except CopyUnreachable as error:
                    log.warning("%s; trying another copy", error)
                    continue
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
        with model_errors(exchange.origin, call):
            async with asyncio.timeout_at(call.deadline):
                return await exchange.response.aread()

    async def relay(self, exchange: Exchange, call: Call) -> AsyncIterator[bytes]:
        """The body as it arrives; raises StreamEnded when it cannot finish."""
        chunks = exchange.response.aiter_raw()
        try:
            while True:
                # The timeout wraps the wait only, never a yield: the consumer's time is not the copy's.
                async with asyncio.timeout_at(call.deadline):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    return
                yield chunk
        except TimeoutError:
            raise StreamEnded(exchange.origin.timed_out(call.deadline_s or 0.0), StreamErrorCode.TIMEOUT) from None
        except httpx.TransportError as error:
            raise StreamEnded(exchange.origin.broken(error), StreamErrorCode.BROKEN) from None

    def router(self, component: str) -> Router:
        return self.admission.router(component)

    def _wait_s(self, call: Call) -> float:
        wait = self.settings.queue_timeout_s
        if call.deadline is not None:
            wait = min(wait, call.deadline - asyncio.get_running_loop().time())
        return wait

    def _origin(self, call: Call, copy_id: str) -> Origin:
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
