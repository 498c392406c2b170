"""Requests that survive the copy they run on: the gateway's side of pier/resumable.py.

The gateway asks every copy for a resumable answer. A copy on pier's engine answers in frames: the client's
bytes, each with the token ids that produced them. When that copy dies (its connection breaks, its answer ends
early, or it gives the request up because its engine failed), `Resumable` sends the request to another ready
copy with those tokens as a continuation, and reads on: the client gets one answer, with nothing repeated and
nothing missing. Bring-your-own-code copies answer without frames and are forwarded as before.

Bounded: a request is resumed at most `attempts` times, and one that was on `poison_copies` copies when they
died is not sent to another (a request that crashes the model would take every copy down in turn); for
`poison_memory_s` the same request (same component, route and body) is refused at once, so a client that
retries it does not start over. What a request ends with then is an in-protocol error naming the copies.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import httpx

from pier.backends.base import CopyStatus
from pier.channel.frames import (
    ABANDON,
    CONTINUE,
    DATA,
    FRAMED,
    HEAD,
    LAST,
    RESUMABLE,
    STATE,
    TOKENS,
    BrokenFrames,
    Continuation,
    Frame,
    FrameReader,
)
from pier.channel.refusal import REFUSED_HEADER
from pier.runtime.call import OVERLOADED, Call, StreamEnded
from pier.runtime.errors import InvocationError, ModelError, Origin
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.router import Lease
from pier.runtime.settings import ResumeSettings
from pier.runtime.upstream import CopyUnreachable

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from pier.runtime.settings import RuntimeSettings
    from pier.runtime.upstream import Upstream

log = logging.getLogger(__name__)

RESUME_POLL_S = 0.25  # how often a request waiting for a copy to resume on looks again
DROPPED_HEADERS = frozenset({"content-length", "transfer-encoding"})


def asks(settings: ResumeSettings) -> dict[str, str]:
    """The headers that ask a copy for a resumable answer."""
    return {RESUMABLE: "1"} if settings.attempts > 0 else {}


def framed(response: httpx.Response) -> bool:
    return response.headers.get(FRAMED) == "1"


@dataclass(frozen=True)
class Death:
    """A copy's process that died while running a request."""

    copy_id: str
    pid: int | None

    def __str__(self) -> str:
        return f"{self.copy_id} (pid {self.pid})" if self.pid else self.copy_id


class Casualties:
    """Requests that took down copies: one that was on `poison_copies` copies when they died is remembered (by
    fingerprint: component, route and body) for `poison_memory_s`, and the same request is refused meanwhile,
    so a client that retries it does not start the round again. Only a request's own deaths count: identical
    requests that each met one unrelated death are not condemned."""

    def __init__(self, settings: ResumeSettings, limit: int = 4096) -> None:
        self.settings = settings
        self.limit = limit
        self._condemned: OrderedDict[str, tuple[float, list[Death]]] = OrderedDict()  # key -> (when, deaths)

    def __len__(self) -> int:
        return len(self._condemned)

    @staticmethod
    def key(call: Call) -> str:
        digest = hashlib.sha256(f"{call.target.component}\0{call.path}\0".encode())
        digest.update(call.body)
        return digest.hexdigest()

    def condemn(self, call: Call, deaths: Sequence[Death]) -> None:
        key = self.key(call)
        self._condemned[key] = (time.monotonic(), list(deaths))
        self._condemned.move_to_end(key)
        while len(self._condemned) > self.limit:
            self._condemned.popitem(last=False)

    def condemned(self, call: Call) -> list[Death]:
        """The copies this request took down, if it is still refused for it."""
        if not self._condemned:
            return []
        key = self.key(call)
        entry = self._condemned.get(key)
        if entry is None:
            return []
        if time.monotonic() - entry[0] > self.settings.poison_memory_s:
            del self._condemned[key]
            return []
        return entry[1]


def poisoned(call: Call, deaths: Sequence[Death], origin: Origin, memory_s: float) -> ModelError:
    """The error a request ends with (or is refused with) once it took down too many copies."""
    copies = [str(d) for d in deaths]
    names = " and ".join([", ".join(copies[:-1]), copies[-1]] if len(copies) > 1 else copies)
    message = (
        f"This request was running on copies {names} of {call.target.component} when each of them died or "
        f"failed, so pier does not send it to another copy: it may crash the model (out of memory, or a failure "
        f"in llama.cpp). Check those copies' logs (pier logs); the same request is refused for the next "
        f"{memory_s:.0f} s."
    )
    return ModelError(message, original_status=0, original_message=message, log_stream_arn=origin.log_stream_arn)


class Relay(Protocol):
    """What a resumable answer needs of the forwarder (pier.runtime.forward.Forwarder) to go on elsewhere."""

    settings: RuntimeSettings
    upstream: Upstream
    casualties: Casualties
    stopping: bool

    def deadline(self, call: Call) -> AbstractAsyncContextManager[None]: ...

    def shutting_down(self) -> InvocationError: ...

    def out_of_time(self, call: Call, origin: Origin) -> StreamEnded: ...

    async def next_copy(self, call: Call, copies: Sequence[CopyStatus] | None, exclude: Collection[str],
                        timeout_s: float | None = None) -> Lease | None: ...

    def origin_of(self, call: Call, copy_id: str) -> Origin: ...


class Resumable:
    """One request answered in frames: the head, then the client's bytes, across as many copies as it takes."""

    def __init__(self, forwarder: Relay, call: Call, lease: Lease, origin: Origin, response: httpx.Response,
                 tried: list[str]) -> None:
        self.forwarder = forwarder
        self.settings: ResumeSettings = forwarder.settings.resume
        self.call = call
        self.tried = tried  # copies that were asked and could not take it (refused, unreachable)
        self.tokens: list[int] = []  # generated so far, across copies
        self.state: dict[str, object] = {}
        self.opened = False  # some of the answer's bytes have arrived
        self.head: httpx.Response | None = None
        self.done = False
        self.resumes = 0
        self._dead: dict[str, int | None] = {}  # copy id -> the pid that died under this request
        self._deaths: list[Death] = []
        self._give_up_at: float | None = None  # while looking for a copy to go on with: when to stop looking
        self._frames: deque[Frame] = deque()
        self._use(lease, origin, response)

    @property
    def origin(self) -> Origin:
        return self._origin

    # -- what the forwarder reads --------------------------------------------------------------------

    async def open(self) -> httpx.Response:
        """The answer's status and headers (a whole answer's come once it is computed); raises the request's
        error if no copy could give them."""
        try:
            while self.head is None:
                await self._frame()
        except StreamEnded as ended:
            raise ended.error from None
        return self.head

    async def body(self) -> AsyncIterator[bytes]:
        """The client's bytes as they arrive; raises StreamEnded when the answer cannot be completed."""
        while not self.done:
            frame = await self._frame()
            if frame.kind in (DATA, LAST) and frame.data:
                yield frame.data

    async def aclose(self) -> None:
        await self._response.aclose()
        self._lease.release()

    # -- frames, across copies -----------------------------------------------------------------------

    async def _frame(self) -> Frame:
        """The next head or data frame of the answer; S and T frames are taken in on the way, and a copy that
        fails is replaced (or the request given up) here."""
        while True:
            while not self._frames:
                await self._read()
            frame = self._frames.popleft()
            if frame.kind in (TOKENS, DATA, LAST):
                self._give_up_at = None  # a copy is generating: a later failure may wait afresh
            if frame.kind == STATE:
                self.state.update(frame.json())
            elif frame.kind == TOKENS:
                self.tokens.extend(frame.tokens)
            elif frame.kind == ABANDON:
                await self._failed(f"its engine could not finish the request ({frame.data.decode(errors='replace')})")
            elif frame.kind == HEAD:
                if await self._head(frame):
                    return frame
            else:
                self.tokens.extend(frame.tokens)
                self.opened = self.opened or bool(frame.data)
                self.done = frame.kind == LAST
                return frame

    async def _read(self) -> None:
        try:
            async with self.forwarder.deadline(self.call):
                chunk = await anext(self._chunks, None)
            if chunk is None:
                await self._failed("its answer ended before it was complete")
                return
            self._frames.extend(self._reader.feed(chunk))
        except TimeoutError:
            raise self._out_of_time() from None
        except httpx.TransportError as error:
            await self._failed(f"the connection broke ({type(error).__name__}: {error or 'closed'})")
        except BrokenFrames as error:
            await self._failed(f"its answer was garbled ({error})")

    async def _head(self, frame: Frame) -> bool:
        """Take a copy's head: True when it is the answer's (the first one, or an error to give up with)."""
        value = frame.json()
        head = httpx.Response(value["status"], headers=[(k, v) for k, v in value["headers"]
                                                        if k.lower() not in DROPPED_HEADERS])
        resuming = self.resumes > 0 or self.head is not None
        if REFUSED_HEADER in head.headers and (resuming or self._another_copy()):
            # Refused before any work (shutting down, loading, full): another copy takes it as it is; a
            # request being resumed waits for one rather than fail (the refusal is momentary).
            log.info("copy %s refused the request (%s); trying another copy", self._copy.copy_id,
                     head.headers[REFUSED_HEADER])
            self.tried.append(self._copy.copy_id)
            await self._switch()
            return False
        if self.head is None:
            self.head = head
            return True
        if head.is_success:
            return False  # a continuation's head: the client has the first one
        body = await self._rest()
        raise StreamEnded(self._origin.answered(head.status_code, body), StreamErrorCode.BROKEN)

    async def _rest(self) -> bytes:
        parts = []
        while True:
            while not self._frames:
                await self._read()
            frame = self._frames.popleft()
            if frame.kind in (DATA, LAST):
                parts.append(frame.data)
            if frame.kind == LAST:
                return b"".join(parts)

    # -- when a copy fails ---------------------------------------------------------------------------

    async def _failed(self, cause: str) -> None:
        """The copy running the request died (or gave it up): resume on another copy, or end the request."""
        copy = self._copy
        self._dead[copy.copy_id] = copy.pid
        self._deaths.append(Death(copy.copy_id, copy.pid))
        killed = self._deaths
        said = (f"copy {copy.copy_id} of {self.call.target.component} failed during a request after "
                f"{len(self.tokens)} tokens: {cause}")
        if self.forwarder.stopping:
            raise StreamEnded(self.forwarder.shutting_down(), None)
        if len(killed) >= self.settings.poison_copies:
            log.error("%s; the request was on %d copies that died (%s): not resuming it", said, len(killed),
                      ", ".join(map(str, killed)))
            self.forwarder.casualties.condemn(self.call, killed)
            error = poisoned(self.call, killed, self._origin, self.settings.poison_memory_s)
            raise StreamEnded(error, StreamErrorCode.BROKEN)
        if self.resumes >= self.settings.attempts:
            log.error("%s; it was resumed %d times already: giving up", said, self.resumes)
            raise StreamEnded(self._gave_up(cause), StreamErrorCode.BROKEN)
        self.resumes += 1
        log.warning("%s; resuming it on another copy (resume %d of at most %d)", said, self.resumes,
                    self.settings.attempts)
        await self._switch()

    async def _switch(self) -> None:
        """Send the request, with what was generated so far, to another ready copy; wait for one if needed."""
        await self.aclose()
        loop = asyncio.get_running_loop()
        if self._give_up_at is None:
            self._give_up_at = loop.time() + self.settings.wait_s
        give_up = self._give_up_at
        target = self.call.target
        fresh: Sequence[CopyStatus] | None = None  # the router's latest copies, until a retarget brings newer
        while True:
            if self.forwarder.stopping:
                raise StreamEnded(self.forwarder.shutting_down(), None)
            try:
                lease = await self.forwarder.next_copy(self.call, fresh, self._excluded(target.copies),
                                                       timeout_s=max(0.0, give_up - loop.time()))
            except InvocationError as error:  # no copy had room in time, or the gateway is stopping
                raise StreamEnded(
                    error if self.forwarder.stopping else self._gave_up(f"no other copy had room ({error.message})"),
                    StreamErrorCode.BROKEN) from None
            if lease is not None and await self._send(lease):
                return
            if lease is None:
                if loop.time() >= give_up:
                    raise StreamEnded(self._gave_up("no other copy was ready to resume it on"),
                                              StreamErrorCode.BROKEN)
                self.tried.clear()  # refusals are momentary: look at every copy again after a pause
                try:
                    async with self.forwarder.deadline(self.call):
                        await asyncio.sleep(RESUME_POLL_S)
                except TimeoutError:
                    raise self._out_of_time() from None
                if self.call.retarget is not None:
                    target = await self.call.retarget()
                    fresh = target.copies

    async def _send(self, lease: Lease) -> bool:
        copy = lease.copy
        origin = self.forwarder.origin_of(self.call, copy.copy_id)
        body, headers = self.call.body, {**self.call.headers, **asks(self.settings)}
        if self.tokens or self.opened or self.state:
            prefix = Continuation(tuple(self.tokens), self.opened, self.state).encode()
            body, headers = prefix + body, {**headers, CONTINUE: str(len(prefix))}
        try:
            async with self.forwarder.deadline(self.call):
                response = await self.forwarder.upstream.send(copy, self.call.path, body, headers)
        except TimeoutError:
            lease.release()
            raise self._out_of_time() from None
        except (CopyUnreachable, httpx.TransportError) as error:
            log.warning("could not resume on copy %s (%s); trying another copy", copy.copy_id, error)
            lease.release()
            self.tried.append(copy.copy_id)
            return False
        if response.status_code == OVERLOADED and not framed(response):  # full after all: another copy
            log.info("copy %s is full (429); resuming on another copy", copy.copy_id)
            await response.aclose()
            lease.release()
            self.tried.append(copy.copy_id)
            return False
        if not framed(response):  # not a copy on pier's engine: it could not continue the answer
            await response.aclose()
            lease.release()
            raise StreamEnded(self._gave_up(f"copy {copy.copy_id} cannot continue it"), StreamErrorCode.BROKEN)
        if self.tokens:
            log.info("resuming on copy %s from token %d", copy.copy_id, len(self.tokens))
        self._use(lease, origin, response)
        return True

    def _use(self, lease: Lease, origin: Origin, response: httpx.Response) -> None:
        self._lease, self._origin, self._response = lease, origin, response
        self._copy = lease.copy
        self._chunks = response.aiter_raw()
        self._reader = FrameReader()
        self._frames.clear()

    def _excluded(self, copies: Sequence[CopyStatus]) -> set[str]:
        dead = {c.copy_id for c in copies if c.copy_id in self._dead and self._dead[c.copy_id] == c.pid}
        return dead | set(self.tried)

    def _another_copy(self) -> bool:
        excluded = self._excluded(self.call.target.copies) | {self._copy.copy_id}
        return any(c.copy_id not in excluded for c in self.call.target.ready())

    # -- how it ends ----------------------------------------------------------------------------------

    def _out_of_time(self) -> StreamEnded:
        return self.forwarder.out_of_time(self.call, self._origin)

    def _gave_up(self, cause: str) -> InvocationError:
        if self.resumes == 0 and not self.tokens:
            return self._origin.broken(ConnectionError(cause))
        message = (
            f"The request could not be completed: copy {self._copy.copy_id} failed ({cause}) after "
            f"{self.resumes} resume(s) on other copies and {len(self.tokens)} generated tokens. Retry the request; "
            "if copies keep failing, read their logs (pier logs)."
        )
        return ModelError(message, original_status=0, original_message=message,
                          log_stream_arn=self._origin.log_stream_arn)

