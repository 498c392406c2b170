"""What every request's attempts on copies share, one per gateway: admission (which copy has room, where the
rest wait), the HTTP client to copies, the copies known to answer in frames, the requests that took copies
down (pier.runtime.attempts.resume), and the deadline of every wait. The attempt loop itself is answer.py.

`stop()` (the gateway's drain is over) ends every wait at once with ServiceUnavailable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace

import httpx

from pier.backends.base import CopyStatus
from pier.multi_model import CacheReport
from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.attempts import resume
from pier.runtime.attempts.call import Call, StreamEnded
from pier.runtime.copy_choice import CopyChooser, Lease
from pier.runtime.errors import InvocationError, ModelError, Origin, ServiceUnavailable, Throttled
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.observer import InvocationObserver, Invoked
from pier.runtime.settings import RuntimeSettings
from pier.runtime.upstream import CopyUnreachable, Upstream

log = logging.getLogger(__name__)
DEADLINE_SETTING = "PIER_INVOCATION_TIMEOUT_SECONDS"

PathOn = Callable[[str, str], Awaitable[str]]  # (copy id, a file on the gateway's host) -> where the copy reads it


class FileUnreachable(CopyUnreachable):
    """A file the request names (an adapter's) cannot reach the copy: the request never went to it."""


@dataclass
class Timing:
    """One request's times, for the observer."""

    started: float
    sent: float | None = None  # when the request last went to a copy
    model_cache: CacheReport | None = None  # how a multi-model copy found the request's model


def admission_of(settings: RuntimeSettings) -> Admission:
    """The runtime's admission, made before it where others read it too (autoscaling's load)."""
    return Admission(AdmissionLimits(
        settings.queue, settings.queue_timeout_s, settings.affinity_slack, settings.per_copy_concurrency))


class Forwarder:
    def __init__(self, settings: RuntimeSettings, client: httpx.AsyncClient | None = None,
                 observer: InvocationObserver | None = None, path_on: PathOn | None = None,
                 admission: Admission | None = None) -> None:
        self.settings = settings
        self.observer = observer
        self.path_on = path_on  # where a copy reads a file of the gateway's host (Backend.path_on); None: there
        self.admission = admission or admission_of(settings)
        self.upstream = Upstream(client, connect_timeout_s=settings.connect_timeout_s)
        self.casualties = resume.Casualties(settings.resume)
        self.framed: set[tuple[str, int | None]] = set()  # copies (id, pid) that answered in frames
        self.stopping = False
        self._waits: set[asyncio.Timeout] = set()

    async def aclose(self) -> None:
        await self.upstream.aclose()

    def chooser(self, component: str) -> CopyChooser:
        return self.admission.chooser(component)

    async def paths_on(self, copy: CopyStatus, files: Mapping[str, str]) -> dict[str, str]:
        """`files` (header -> a file on the gateway's host) as `copy` reads them; FileUnreachable when the copy
        cannot get one (its node is gone, the file was removed): the request goes to another copy."""
        if self.path_on is None:
            return dict(files)
        try:
            return {header: await self.path_on(copy.copy_id, path) for header, path in files.items()}
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise FileUnreachable(f"copy {copy.copy_id} cannot read {', '.join(files.values())}: {error}") from error

    def resumable(self, copy: CopyStatus) -> bool:
        """A copy on pier's engine (it answered in frames): one whose connection breaks before it answers died."""
        return (copy.copy_id, copy.pid) in self.framed and self.settings.resume.attempts > 0

    async def lease(self, call: Call, copies: Sequence[CopyStatus] | None, exclude: Collection[str],
                    timeout_s: float) -> Lease | None:
        """A ready copy for `call` outside `exclude` with room, leased until released; it waits behind earlier
        requests at most `timeout_s` (and the call's deadline). None when no copy outside `exclude` is ready at
        all; Throttled when none had room in time. `copies`: a fresh snapshot of the copies, or None for the
        latest the copy chooser was given."""
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

    def wait_s(self, call: Call) -> float:
        """The longest a request may wait for a copy with room now."""
        wait = self.settings.queue_timeout_s
        due = call.due()
        if due is not None:
            wait = min(wait, due - asyncio.get_running_loop().time())
        return wait

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

    def out_of_time(self, call: Call, origin: Origin) -> StreamEnded:
        """How a stream that ran out of time ends: at the gateway's drain (StreamBroken, a service's end), or at
        the limit of `call`'s deadline it hit, named with the setting that raises it."""
        if self.stopping:
            return StreamEnded(self.shutting_down(), None)
        if call.stream is not None:
            error = origin.stream_timed_out(call.stream.limit(), call.stream, DEADLINE_SETTING)
            return StreamEnded(error, StreamErrorCode.TIMEOUT)
        return StreamEnded(origin.timed_out(call.deadline_s or 0.0, call.deadline_setting), StreamErrorCode.TIMEOUT)

    def origin_of(self, call: Call, copy_id: str) -> Origin:
        return Origin(call.endpoint, call.target.variant, copy_id, self.settings.region, self.settings.account)

    def unless_stopping(self, error: InvocationError) -> InvocationError:
        """A model's error that a wait stop() ended says the gateway is shutting down instead."""
        return self.shutting_down() if self.stopping and isinstance(error, ModelError) else error

    @contextmanager
    def model_errors(self, origin: Origin, call: Call) -> Iterator[None]:
        """A copy that runs out of time or drops the connection before its answer began is a ModelError."""
        try:
            try:
                yield
            except TimeoutError:
                raise origin.timed_out(call.deadline_s or 0.0, call.deadline_setting) from None
            except httpx.TransportError as error:
                raise origin.broken(error) from None
        except ModelError as error:
            raise self.unless_stopping(error) from None

    def observe(self, call: Call, timing: Timing, status: int, model_status: int | None = None) -> None:
        """Tell the observer how a request went, as it ends (`model_status`: what the model itself answered, for
        a ModelError, whose client sees a 424)."""
        assert self.observer is not None
        ended = asyncio.get_running_loop().time()
        sent = ended if timing.sent is None else timing.sent
        try:
            self.observer.invoked(Invoked(call.endpoint, call.target.variant, call.target.component, status,
                                          ended - sent, sent - timing.started, len(call.target.ready()),
                                          timing.model_cache, model_status))
        except Exception:  # metrics must never fail a request
            log.exception("recording an invocation's metrics failed")
