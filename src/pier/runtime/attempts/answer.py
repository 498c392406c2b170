"""A Call's answer across copies: the gateway's one attempt loop, from the first copy to the last byte.

Each attempt leases a ready copy with room (pier.runtime.admission), sends the request, and classifies what
came back (attempt.classify). A copy that could not be reached, or that refused the request before
any work (full, shutting down, loading), is skipped for another, waiting for one with room if need be; a copy's
429 ends as Throttled when no other copy takes the request, never as a ModelError. A plain answer is the
client's. An answer in frames (pier.runtime.attempts.resume) is read on, and when its copy dies the request goes on from
the frames already relayed, on another copy. Every wait is under the call's deadline (forward.py);
leaving the block closes the upstream request, which stops the copy's work.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx

from pier.backends.base import CopyStatus
from pier.channel import kv_held
from pier.channel.frames import ABANDON, DATA, HEAD, LAST, TOKENS, BrokenFrames, Frame
from pier.channel.headers import KV_HELD, REFUSED_HEADER
from pier.errors import PierError
from pier.multi_model import CacheReport
from pier.runtime.attempts import resume
from pier.runtime.attempts.attempt import (
    CUT,
    NEXT_COPY,
    NOT_REACHED,
    Fate,
    Outcome,
    Reply,
    Situation,
    classify,
    fate,
    gave_up,
    none_took_it,
)
from pier.runtime.attempts.call import Call, StreamEnded
from pier.runtime.attempts.forward import Forwarder, Timing
from pier.runtime.copy_choice import Lease
from pier.runtime.errors import InvocationError, ModelError, Origin
from pier.runtime.eventstream import StreamErrorCode
from pier.runtime.routing_strategy import Strategy
from pier.runtime.target import Target
from pier.runtime.upstream import CopyUnreachable

log = logging.getLogger(__name__)

RESUME_POLL_S = 0.25  # how often a request waiting for a copy to resume on looks again
BROKEN = StreamErrorCode.BROKEN


@asynccontextmanager
async def answer_of(forwarder: Forwarder, call: Call) -> AsyncIterator[Answer]:
    """`call`'s answer from a copy with room: its status and headers, its body to read or relay, the copy held
    until the block ends; the observer hears how it went when it ends."""
    timing = None if forwarder.observer is None else Timing(asyncio.get_running_loop().time())
    answer = Answer(forwarder, call, timing)
    status, model_status = 500, None
    try:
        await answer.open()
        status = answer.head.status_code
        yield answer
    except PierError as error:
        status = error.wire.sagemaker_status
        if isinstance(error, ModelError):  # the metrics count what the model answered, not the 424
            model_status = error.original_status
        raise
    finally:
        await answer.aclose()
        if timing is not None:
            forwarder.observe(call, timing, status, model_status)


class Answer:
    """One Call's answer: the attempts until a copy takes the request, then its body, which goes on from the
    frames on another copy when the copy giving them dies."""

    def __init__(self, forwarder: Forwarder, call: Call, timing: Timing | None = None) -> None:
        self.forwarder = forwarder
        self.call = call
        self.settings = forwarder.settings.resume
        self.timing = timing
        self.tried: list[str] = []  # copies that were asked and could not take it (refused, unreachable)
        self.full: list[str] = []  # copies that answered 429
        self.asked: str | None = None  # the copy the request went to last
        self.resumes = 0
        self._frames: resume.Resumable | None = None  # once a copy answered in frames: what they carried
        self._head: httpx.Response | None = None  # the client's status and headers
        self._by: Origin  # the copy whose head the client has
        self._copy: CopyStatus  # the copy taking the request now, and its answer
        self._origin: Origin
        self._lease: Lease | None = None
        self._response: httpx.Response | None = None
        self._chunks: AsyncIterator[bytes]
        self._leased = False  # a copy was leased: later leases take the copy chooser's latest copies
        self._wait_until = 0.0  # opening: the end of the wait for a copy with room
        self._give_up_at: float | None = None  # framed: while looking for a copy to go on with, when to stop
        self._deaths: list[resume.Death] = []  # the copies' processes that died under it
        self._cut: BaseException | None = None  # why the last attempt's connection broke

    # -- what the routes read ------------------------------------------------------------------------

    @property
    def head(self) -> httpx.Response:
        """The answer's status and headers; its body is read through `read()` or `relay()`."""
        assert self._head is not None, "open() the answer first"
        return self._head

    @property
    def copy_id(self) -> str:
        """The copy that answered (the first, when the answer went on elsewhere)."""
        return self._by.copy_id

    def error(self, body: bytes) -> ModelError:
        """The copy's error answer as the client gets it: a ModelError naming the copy."""
        return self._by.answered(self.head.status_code, body)

    async def open(self) -> None:
        """Attempt copies until one answers; raises the request's error when none could."""
        call = self.call
        if not call.target.ready():
            raise call.target.unavailable(call.endpoint)
        if killed := self.forwarder.casualties.condemned(call):  # it took copies down: keep it from the others
            origin = self.forwarder.origin_of(call, killed[-1].copy_id)
            raise resume.poisoned(call, killed, origin, self.settings.poison_memory_s)
        self._wait_until = asyncio.get_running_loop().time() + self.forwarder.wait_s(call)
        try:
            await self._attempt()
            while self._head is None:
                await self._frame()
        except StreamEnded as ended:
            raise self.forwarder.unless_stopping(ended.error) from None

    async def read(self) -> bytes:
        """The whole body within the deadline."""
        if self._frames is not None:
            try:
                return b"".join([part async for part in self._framed_body()])
            except StreamEnded as ended:
                raise ended.error from None
        with self.forwarder.model_errors(self._by, self.call):
            async with self.forwarder.deadline(self.call):
                return await self._plain().aread()

    async def relay(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises StreamEnded when it cannot finish."""
        chunks = self._plain().aiter_raw() if self._frames is None else self._framed_body()
        loop = asyncio.get_running_loop()
        try:
            while True:
                # The timeout wraps the wait only, never a yield: the consumer's time is not the copy's.
                async with self.forwarder.deadline(self.call):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    return
                if self.call.stream is not None:  # it flows: the next part has the whole deadline again
                    self.call.stream.moved(loop.time())
                yield chunk
        except TimeoutError:
            raise self.forwarder.out_of_time(self.call, self._by) from None
        except httpx.TransportError as error:
            raise StreamEnded(self._by.broken(error), BROKEN) from None

    async def aclose(self) -> None:
        if self._response is not None:
            await self._response.aclose()
        if self._lease is not None:
            self._lease.release()

    # -- the attempt loop ----------------------------------------------------------------------------

    async def _attempt(self) -> None:
        """Send the request to one copy after another until one takes it: its plain answer is the client's, or
        it answers in frames, read on from there. Raises the request's error when no copy takes it in time."""
        target, fresh = self.call.target, None
        while True:
            lease = await self._next_lease(target, fresh)
            if lease is None:
                if (newer := await self._pause()) is not None:
                    target, fresh = newer, newer.copies
                continue
            if await self._try(lease):
                return

    async def _try(self, lease: Lease) -> bool:
        """One attempt on the leased copy: True when it took the request."""
        copy = lease.copy
        self.asked = copy.copy_id
        origin = self.forwarder.origin_of(self.call, copy.copy_id)
        try:
            reply, response = await self._send(copy, origin)
        except BaseException:
            lease.release()
            raise
        outcome = classify(reply, self._situation(copy))
        if outcome in (Outcome.FRAMED, Outcome.ANSWERED):
            assert response is not None
            self._take(lease, origin, response, outcome)
            return True
        if response is not None:
            await response.aclose()
        lease.release()
        if outcome is Outcome.BROKEN:
            assert self._cut is not None
            raise self.forwarder.unless_stopping(origin.broken(self._cut))
        if outcome is Outcome.STRANDED:  # not a copy on pier's engine: it could not continue the answer
            raise StreamEnded(self._gave_up(f"copy {copy.copy_id} cannot continue it"), BROKEN)
        assert outcome in NEXT_COPY
        if response is None:
            log.warning("copy %s did not take the request (%r); trying another copy", copy.copy_id, self._cut)
        else:
            log.info("copy %s refused the request (%s %s); trying another copy", copy.copy_id, response.status_code,
                     response.headers.get(REFUSED_HEADER, ""))
        self.tried.append(copy.copy_id)
        if outcome is Outcome.THROTTLED:
            self.full.append(copy.copy_id)
        return False

    async def _send(self, copy: CopyStatus, origin: Origin) -> tuple[Reply, httpx.Response | None]:
        call, forwarder = self.call, self.forwarder
        body, headers = call.body, {**call.headers, **resume.asks(self.settings)}
        if call.route.routing.strategy is Strategy.KV_AWARE:
            headers.update(kv_held.WANTED)
        if self._frames is not None:
            body, headers = self._frames.request(body, headers)
        elif self.timing is not None:
            self.timing.sent = asyncio.get_running_loop().time()
        try:
            async with forwarder.deadline(call):
                if call.target.files:
                    headers.update(await forwarder.paths_on(copy, call.target.files))
                response = await forwarder.upstream.send(copy, call.path, body, headers, method=call.method)
        except TimeoutError:
            if self._frames is not None:
                raise self._out_of_time() from None
            late = origin.timed_out(call.deadline_s or 0.0, call.deadline_setting)
            raise self.forwarder.unless_stopping(late) from None
        except (CopyUnreachable, httpx.TransportError) as error:
            self._cut = error
            return (NOT_REACHED if isinstance(error, CopyUnreachable) else CUT), None
        # What the copy's prefix cache holds rides on the outer answer, framed or not (KV_AWARE routing).
        forwarder.chooser(call.target.component).holds_prefixes(copy.copy_id,
                                                               kv_held.decode_held(response.headers.get(KV_HELD)))
        if self._frames is None and (report := CacheReport.of(response.headers)) is not None:
            forwarder.chooser(call.target.component).holds(copy.copy_id, report.loaded)
            if self.timing is not None:
                self.timing.model_cache = report
        reply = Reply(response.status_code, refused=REFUSED_HEADER in response.headers,
                      framed=resume.framed(response))
        return reply, response

    def _take(self, lease: Lease, origin: Origin, response: httpx.Response, outcome: Outcome) -> None:
        """The copy took the request: read its answer from here."""
        self._lease, self._origin, self._response, self._copy = lease, origin, response, lease.copy
        if outcome is Outcome.ANSWERED:
            self._head, self._by = response, origin
            return
        self.forwarder.framed.add((lease.copy.copy_id, lease.copy.pid))  # a copy on pier's engine
        if self._frames is None:
            self._frames = resume.Resumable()
        else:
            self._frames.restart()
            if self._frames.tokens:
                log.info("resuming on copy %s from token %d", lease.copy.copy_id, len(self._frames.tokens))
        self._chunks = response.aiter_raw()

    async def _next_lease(self, target: Target, fresh: Sequence[CopyStatus] | None) -> Lease | None:
        forwarder, call = self.forwarder, self.call
        now = asyncio.get_running_loop().time()
        if self._frames is None:  # the target's copies were resolved just now; a second try takes the latest
            copies = call.target.copies if not self._leased else None
            self._leased = True
            return await forwarder.lease(call, copies, self._excluded(target.copies), self._wait_until - now)
        if forwarder.stopping:
            raise StreamEnded(forwarder.shutting_down(), None)
        assert self._give_up_at is not None
        wait = min(max(0.0, self._give_up_at - now), forwarder.wait_s(call))
        try:
            return await forwarder.lease(call, fresh, self._excluded(target.copies), wait)
        except InvocationError as error:  # no copy had room in time, or the gateway is stopping
            raise StreamEnded(
                error if forwarder.stopping else self._gave_up(f"no other copy had room ({error.message})"),
                BROKEN) from None

    async def _pause(self) -> Target | None:
        """No copy outside those it tried is ready. That ends an opening request; a framed one waits a moment
        and looks at every copy again (refusals are momentary), the latest copies if it can ask."""
        if self._frames is None:
            raise none_took_it(self.call, self.tried, self.full)
        assert self._give_up_at is not None
        if asyncio.get_running_loop().time() >= self._give_up_at:
            raise StreamEnded(self._gave_up("no other copy was ready to resume it on"), BROKEN)
        self.tried.clear()
        try:
            async with self.forwarder.deadline(self.call):
                await asyncio.sleep(RESUME_POLL_S)
        except TimeoutError:
            raise self._out_of_time() from None
        return None if self.call.retarget is None else await self.call.retarget()

    def _situation(self, copy: CopyStatus) -> Situation:
        excluded = self._excluded(self.call.target.copies) | {copy.copy_id}
        return Situation(framed=self._frames is not None, resumed=self.resumes > 0, headed=self._head is not None,
                         others=any(c.copy_id not in excluded for c in self.call.target.ready()),
                         known=self.forwarder.resumable(copy))

    def _excluded(self, copies: Sequence[CopyStatus]) -> set[str]:
        dead = {c.copy_id for c in copies if resume.Death(c.copy_id, c.pid) in self._deaths}
        return dead | set(self.tried) | self.call.avoid

    # -- frames, across copies -----------------------------------------------------------------------

    async def _framed_body(self) -> AsyncIterator[bytes]:
        assert self._frames is not None
        while not self._frames.done:
            frame = await self._frame()
            if frame.kind in (DATA, LAST) and frame.data:
                yield frame.data

    async def _frame(self) -> Frame:
        """The next head or data frame of the answer; a copy that fails is replaced (or the request given up) on
        the way."""
        while True:
            frame = await self._next_frame()
            if frame.kind in (TOKENS, DATA, LAST):
                self._give_up_at = None  # a copy is generating: a later failure may wait afresh
            if frame.kind == ABANDON:
                await self._failed(f"its engine could not finish the request ({frame.data.decode(errors='replace')})")
            elif frame.kind == HEAD:
                if await self._head_frame(frame):
                    return frame
            elif frame.kind in (DATA, LAST):
                return frame

    async def _next_frame(self) -> Frame:
        assert self._frames is not None
        while (frame := self._frames.next()) is None:
            await self._read()
        return frame

    async def _read(self) -> None:
        """The copy's next bytes into the frame reader; a copy that fails is replaced."""
        assert self._frames is not None
        try:
            async with self.forwarder.deadline(self.call):
                chunk = await anext(self._chunks, None)
            if chunk is None:
                cause = "its answer ended before it was complete"
            else:
                self._frames.feed(chunk)
                return
        except TimeoutError:
            raise self._out_of_time() from None
        except httpx.TransportError as error:
            cause = f"the connection broke ({type(error).__name__}: {error or 'closed'})"
        except BrokenFrames as error:
            cause = f"its answer was garbled ({error})"
        await self._failed(cause)

    async def _head_frame(self, frame: Frame) -> bool:
        """Take a copy's head: True when it is the answer's (the first one)."""
        head = resume.head_of(frame)
        reply = Reply(head.status_code, refused=REFUSED_HEADER in head.headers, in_frames=True)
        outcome = classify(reply, self._situation(self._copy))
        if outcome is Outcome.REFUSED:  # another copy takes it as it is; a resumed request waits for one
            log.info("copy %s refused the request (%s); trying another copy", self._copy.copy_id,
                     head.headers[REFUSED_HEADER])
            self.tried.append(self._copy.copy_id)
            await self._switch()
            return False
        if outcome is Outcome.ANSWERED:
            self._head, self._by = head, self._origin
            return True
        if outcome is Outcome.CONTINUED:
            return False
        raise StreamEnded(self._origin.answered(head.status_code, await self._rest()), BROKEN)

    async def _rest(self) -> bytes:
        parts = []
        while True:
            frame = await self._next_frame()
            if frame.kind in (DATA, LAST):
                parts.append(frame.data)
            if frame.kind == LAST:
                return b"".join(parts)

    # -- when a copy fails ---------------------------------------------------------------------------

    async def _failed(self, cause: str) -> None:
        """The copy running the request died (or gave it up): go on with another copy, or end the request."""
        assert self._frames is not None
        copy, killed = self._copy, self._deaths
        killed.append(resume.Death(copy.copy_id, copy.pid))
        said = (f"copy {copy.copy_id} of {self.call.target.component} failed during a request after "
                f"{len(self._frames.tokens)} tokens: {cause}")
        verdict = fate(len(killed), self.resumes, self.settings, stopping=self.forwarder.stopping)
        if verdict is Fate.STOPPED:
            raise StreamEnded(self.forwarder.shutting_down(), None)
        if verdict is Fate.CONDEMNED:
            log.error("%s; the request was on %d copies that died (%s): not resuming it", said, len(killed),
                      ", ".join(map(str, killed)))
            self.forwarder.casualties.condemn(self.call, killed)
            raise StreamEnded(resume.poisoned(self.call, killed, self._origin, self.settings.poison_memory_s), BROKEN)
        if verdict is Fate.EXHAUSTED:
            log.error("%s; it was resumed %d times already: giving up", said, self.resumes)
            raise StreamEnded(self._gave_up(cause), BROKEN)
        self.resumes += 1
        log.warning("%s; resuming it on another copy (resume %d of at most %d)", said, self.resumes,
                    self.settings.attempts)
        await self._switch()

    async def _switch(self) -> None:
        """Send the request, with what was generated so far, to another ready copy; wait for one if needed."""
        await self.aclose()
        if self._give_up_at is None:
            self._give_up_at = asyncio.get_running_loop().time() + self.settings.wait_s
        await self._attempt()

    # -- how it ends ----------------------------------------------------------------------------------

    def _out_of_time(self) -> StreamEnded:
        return self.forwarder.out_of_time(self.call, self._origin)

    def _gave_up(self, cause: str) -> InvocationError:
        tokens = len(self._frames.tokens) if self._frames is not None else 0
        return gave_up(self._origin, cause, self.resumes, tokens)

    def _plain(self) -> httpx.Response:
        assert self._response is not None
        return self._response
