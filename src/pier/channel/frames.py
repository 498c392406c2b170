"""The internal channel between the gateway and a copy on pier's engine, which lets the gateway resume a
request on another copy when the one running it dies.

The gateway asks with `X-Pier-Resumable: 1`. A copy that can (one on pier's engine; bring-your-own-code copies
ignore the header) answers at once `200` with `X-Pier-Frames: 1`, and its body is a sequence of frames,
`kind u8 | length u32 (big-endian) | payload`:

    H  head      JSON {"status": int, "headers": [[name, value], ...]}: the copy's real status and headers
    S  state     JSON object, opaque to the gateway: what a continuation needs to look the same (seed, ids)
    T  tokens    int32 little-endian ids generated so far (before the head, while a whole answer is computed)
    D  data      u32 n | n int32 ids | bytes for the client: the bytes were produced by those ids
    L  last      as D, and the answer is complete: nothing follows
    X  abandon   UTF-8 reason: this copy cannot finish (its engine failed or stopped); resume elsewhere

The client sees exactly the bytes of the D and L frames, under the head's status and headers. A frame counts
only once it has fully arrived, so the tokens the gateway knows and the bytes it relayed always agree.

To resume, the gateway sends the same request to another copy with `X-Pier-Continue: N`: the body's first N
bytes are the continuation, JSON {"tokens": [...], "opened": bool, "state": {...}}, and the original body
follows. That copy prefills prompt + tokens, replays its sampler and text stream over the tokens, and sends
only what the client has not seen yet. Nothing of this reaches a client: the gateway sets these headers itself
and reads the frames.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FRAMES_MEDIA_TYPE = "application/vnd.pier.frames"

HEAD, STATE, TOKENS, DATA, LAST, ABANDON = b"H", b"S", b"T", b"D", b"L", b"X"
KINDS = (HEAD, STATE, TOKENS, DATA, LAST, ABANDON)
_PRELUDE = struct.Struct(">cI")
_COUNT = struct.Struct("<I")
MAX_FRAME_BYTES = 64 * 1024 * 1024  # a frame claiming more is a broken stream, not a big answer


def frame(kind: bytes, payload: bytes) -> bytes:
    return _PRELUDE.pack(kind, len(payload)) + payload


def head_frame(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    return frame(HEAD, json.dumps({"status": status, "headers": [list(h) for h in headers]}).encode())


def state_frame(state: Mapping[str, Any]) -> bytes:
    return frame(STATE, json.dumps(state).encode())


def tokens_frame(tokens: Sequence[int]) -> bytes:
    return frame(TOKENS, _ids(tokens))


def data_frame(tokens: Sequence[int], data: bytes, *, last: bool = False) -> bytes:
    return frame(LAST if last else DATA, _COUNT.pack(len(tokens)) + _ids(tokens) + data)


def abandon_frame(reason: str) -> bytes:
    return frame(ABANDON, reason.encode())


def _ids(tokens: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(tokens)}i", *tokens)


def _unids(raw: bytes | memoryview) -> tuple[int, ...]:
    return struct.unpack(f"<{len(raw) // 4}i", raw)


@dataclass(frozen=True)
class Frame:
    kind: bytes
    tokens: tuple[int, ...] = ()
    data: bytes = b""  # D and L: the client's bytes; H and S: the JSON payload; X: the reason

    def json(self) -> Any:
        return json.loads(self.data)


class BrokenFrames(Exception):
    """The bytes are not frames: the copy is not speaking this protocol (or its stream is corrupt)."""


class FrameReader:
    """Turns the bytes of a framed body, in whatever pieces they arrive, into whole frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames that `chunk` completed, in order; a partial frame waits for the next chunk."""
        buffer = self._buffer
        buffer += chunk
        frames, start = [], 0
        while len(buffer) - start >= _PRELUDE.size:
            kind, length = _PRELUDE.unpack_from(buffer, start)
            if kind not in KINDS or length > MAX_FRAME_BYTES:
                raise BrokenFrames(f"not a pier frame (kind {kind!r}, {length} bytes)")
            end = start + _PRELUDE.size + length
            if len(buffer) < end:
                break
            frames.append(_parse(kind, bytes(buffer[start + _PRELUDE.size : end])))
            start = end
        del buffer[:start]
        return frames

    @property
    def pending(self) -> int:
        """Bytes of a frame that has not fully arrived."""
        return len(self._buffer)


def _parse(kind: bytes, payload: bytes) -> Frame:
    if kind == TOKENS:
        return Frame(kind, _unids(payload))
    if kind in (DATA, LAST):
        (count,) = _COUNT.unpack_from(payload)
        split = _COUNT.size + 4 * count
        return Frame(kind, _unids(memoryview(payload)[_COUNT.size : split]), payload[split:])
    return Frame(kind, (), payload)


@dataclass(frozen=True)
class Continuation:
    """What a copy is told when it continues a request another copy began."""

    tokens: tuple[int, ...] = ()  # generated before, in order; the client has seen the text they made
    opened: bool = False  # the client already has the beginning of the answer (a stream's first events)
    state: Mapping[str, Any] = field(default_factory=dict)  # the S frame of the copy that began it

    def encode(self) -> bytes:
        return json.dumps({"tokens": list(self.tokens), "opened": self.opened, "state": dict(self.state)}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Continuation:
        value = json.loads(raw)
        tokens = value.get("tokens", [])
        state = value.get("state") or {}
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens) or not isinstance(state, dict):
            raise ValueError("a continuation is {\"tokens\": [ids], \"opened\": bool, \"state\": {...}}")
        return cls(tuple(tokens), bool(value.get("opened", False)), state)
