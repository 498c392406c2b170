"""Requests that survive the copy they run on: the gateway's side of pier/channel/frames.py.

The gateway asks every copy for a resumable answer. A copy on pier's engine answers in frames: the client's
bytes, each with the token ids that produced them. When that copy dies (its connection breaks, its answer ends
early, or it gives the request up because its engine failed), the attempt loop (pier.runtime.attempts) sends the
request to another ready copy with those tokens as a continuation, and reads on: the client gets one answer,
with nothing repeated and nothing missing. Bring-your-own-code copies answer without frames and are forwarded
as before. `Resumable` reads the frames and keeps what they carried; the loop decides what each means.

Bounded: a request is resumed at most `attempts` times, and one that was on `poison_copies` copies when they
died is not sent to another (a request that crashes the model would take every copy down in turn); for
`poison_memory_s` the same request (same component, route and body) is refused at once, so a client that
retries it does not start over. What a request ends with then is an in-protocol error naming the copies.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from pier.channel.frames import DATA, LAST, STATE, TOKENS, Continuation, Frame, FrameReader
from pier.channel.headers import CONTINUE, FRAMED, RESUMABLE
from pier.runtime.errors import ModelError, Origin
from pier.runtime.settings import ResumeSettings

if TYPE_CHECKING:  # the attempt loop imports this module: a Call is only named here
    from pier.runtime.attempts.call import Call

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


class Resumable:
    """One request's answer in frames, across the copies that give it: the frames as they complete, and what
    they carried so far (the tokens, the copy's state, whether the client has bytes, whether it is complete).
    A pure reader: it neither reads nor sends; the attempt loop feeds it each copy's bytes in turn."""

    def __init__(self) -> None:
        self.tokens: list[int] = []  # generated so far, across copies
        self.state: dict[str, object] = {}  # the S frame of the copy that began it
        self.opened = False  # the client has some of the answer's bytes
        self.done = False  # the last frame arrived
        self._reader = FrameReader()
        self._pending: deque[Frame] = deque()

    def restart(self) -> None:
        """Another copy's body follows: a frame of the last one that had not fully arrived is dropped."""
        self._reader = FrameReader()
        self._pending.clear()

    def feed(self, chunk: bytes) -> None:
        """Take in the next bytes of the body; raises BrokenFrames when they are not frames."""
        self._pending.extend(self._reader.feed(chunk))

    def next(self) -> Frame | None:
        """The next whole frame, its tokens, state and bytes taken in; None until more bytes are fed."""
        if not self._pending:
            return None
        frame = self._pending.popleft()
        if frame.kind == STATE:
            self.state.update(frame.json())
        elif frame.kind in (TOKENS, DATA, LAST):
            self.tokens.extend(frame.tokens)
        if frame.kind in (DATA, LAST):
            self.opened = self.opened or bool(frame.data)
            self.done = frame.kind == LAST
        return frame

    def request(self, body: bytes, headers: Mapping[str, str]) -> tuple[bytes, dict[str, str]]:
        """The request for the next copy: the same, preceded by what was generated so far (if anything)."""
        if not (self.tokens or self.opened or self.state):
            return body, dict(headers)
        prefix = Continuation(tuple(self.tokens), self.opened, self.state).encode()
        return prefix + body, {**headers, CONTINUE: str(len(prefix))}


def head_of(frame: Frame) -> httpx.Response:
    """A copy's real status and headers, from its H frame."""
    value = frame.json()
    return httpx.Response(value["status"], headers=[(k, v) for k, v in value["headers"]
                                                    if k.lower() not in DROPPED_HEADERS])
