"""Server-sent events, read incrementally: the `data` payloads of a byte stream, in order."""

from __future__ import annotations

import codecs

_FIELD = "data:"


class SseDecoder:
    """Feed bytes as they arrive; get back each complete event's data. Both `data:` and `data: ` forms are
    read (TGI writes no space), `\\r\\n` line ends too; comments and other fields are skipped."""

    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""

    def feed(self, chunk: bytes) -> list[str]:
        self._buffer += self._text.decode(chunk)
        # A lone "\r" may be the first half of a "\r\n" that the next chunk completes.
        ready, held = (self._buffer[:-1], "\r") if self._buffer.endswith("\r") else (self._buffer, "")
        *blocks, rest = ready.replace("\r\n", "\n").split("\n\n")
        self._buffer = rest + held
        return [data for block in blocks if (data := _data(block)) is not None]

    def close(self) -> list[str]:
        """The last event of a stream that ended without a blank line."""
        rest, self._buffer = self._buffer + self._text.decode(b"", final=True), ""
        data = _data(rest.replace("\r\n", "\n"))
        return [] if data is None else [data]


def _data(block: str) -> str | None:
    lines = [line[len(_FIELD) :] for line in block.split("\n") if line.startswith(_FIELD)]
    if not lines:
        return None
    return "\n".join(line.removeprefix(" ") for line in lines)
