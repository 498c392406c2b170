"""Token bytes to user text: whole UTF-8 characters only, and never any part of a stop string."""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class TextDelta:
    text: str
    stop: str | None = None  # the stop string that matched; the text before it is in `text`


class TextStream:
    """Turns a stream of token pieces into safe-to-send text.

    Bytes of a multi-byte character split across tokens are held until the character is complete.
    Text that could be the start of a stop string is held until it is known not to be one, so a
    client never sees any part of a stop string.
    """

    def __init__(self, stop: Sequence[str] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stops = tuple(s for s in stop if s)
        self._longest_stop = max((len(s) for s in self._stops), default=0)
        self._held = ""

    def push(self, piece: bytes, stops: bool = True) -> TextDelta:
        """Add one token's bytes; return the text that is now safe to emit. With `stops` off (before
        min_tokens) stop strings do not end the text and nothing is held for them."""
        text = self._held + self._decoder.decode(piece)
        if not stops:
            self._held = ""
            return TextDelta(text)
        return self._scan(text)

    @property
    def pending_bytes(self) -> bytes:
        """The start of a multi-byte character waiting for the rest of it."""
        return bytes(self._decoder.getstate()[0])

    def flush(self) -> str:
        """End of generation: return whatever is held (an incomplete character becomes U+FFFD)."""
        tail = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return tail

    def _scan(self, text: str) -> TextDelta:
        if not self._stops:
            return TextDelta(text)
        found = first_stop(text, self._stops)
        if found is not None:
            index, stop = found
            self._held = ""
            return TextDelta(text[:index], stop)
        keep = partial_stop_suffix(text, self._stops, self._longest_stop)
        self._held = text[len(text) - keep :] if keep else ""
        return TextDelta(text[: len(text) - keep])


def first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """The earliest stop string in `text` as (index, stop), or None."""
    best: tuple[int, str] | None = None
    for stop in stops:
        index = text.find(stop)
        if index != -1 and (best is None or index < best[0]):
            best = (index, stop)
    return best


def partial_stop_suffix(text: str, stops: Sequence[str], longest: int) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some stop string."""
    for length in range(min(len(text), longest - 1), 0, -1):
        suffix = text[-length:]
        if any(stop.startswith(suffix) for stop in stops):
            return length
    return 0
