from __future__ import annotations

import pytest

from pier.bench.sse_decoder import SseDecoder


@pytest.mark.parametrize(
    ("chunks", "events"),
    [
        ([b"data: a\n\ndata: b\n\n"], ["a", "b"]),
        ([b'data:{"x":1}\n\n'], ['{"x":1}']),  # TGI writes no space after the colon
        ([b"data: a\r\n\r\ndata: b\r\n\r\n"], ["a", "b"]),
        ([b"data: a\r", b"\n\r\n"], ["a"]),  # a CRLF split between reads
        ([b"da", b"ta: hel", b"lo\n", b"\n"], ["hello"]),
        ([b": keep-alive\n\n", b"event: x\ndata: y\nid: 3\n\n"], ["y"]),
        ([b"data: one\ndata: two\n\n"], ["one\ntwo"]),
        ([b"data: caf\xc3", b"\xa9\n\n"], ["café"]),  # a UTF-8 character split between reads
    ],
)
def test_events(chunks: list[bytes], events: list[str]) -> None:
    decoder = SseDecoder()
    got = [event for chunk in chunks for event in decoder.feed(chunk)]
    assert got + decoder.close() == events


def test_last_event_without_blank_line_is_kept_on_close() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"data: a\n\ndata: [DONE]\n") == ["a"]
    assert decoder.close() == ["[DONE]"]
