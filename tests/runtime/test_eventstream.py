from __future__ import annotations

import json

import pytest
from botocore.eventstream import ChecksumMismatch
from botocore.exceptions import EventStreamError

from pier.runtime.eventstream import (
    StreamErrorCode,
    encode_frame,
    internal_stream_failure,
    model_stream_error,
    payload_part,
)
from tests.runtime.botocore_oracle import raw_messages, runtime_events

PAYLOADS = [
    b"",
    b"x",
    b'data: {"token": {"text": " hi"}}\n\n',
    "caf\u00e9 \u2603 \U0001f600".encode(),
    bytes(range(256)),
    b"\x00" * 70_000,  # past the u16 header-value range: only the u32 total length carries it
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_payload_part_decodes_with_botocore(payload: bytes) -> None:
    [message] = raw_messages(payload_part(payload))
    assert message.payload == payload
    assert message.headers == {
        ":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event",
    }
    assert list(runtime_events([payload_part(payload)])) == [{"PayloadPart": {"Bytes": payload}}]


@pytest.mark.parametrize("split", [1, 3, 11, 16, 1000])
def test_frames_split_anywhere_reassemble(split: int) -> None:
    data = b"".join(payload_part(f"data: {i}\n\n".encode()) for i in range(20))
    chunks = [data[i : i + split] for i in range(0, len(data), split)]
    parts = [event["PayloadPart"]["Bytes"] for event in runtime_events(chunks)]
    assert parts == [f"data: {i}\n\n".encode() for i in range(20)]


@pytest.mark.parametrize(
    ("frame", "code", "message", "error_code"),
    [
        (model_stream_error("ran past 58 s", StreamErrorCode.TIMEOUT), "ModelStreamError", "ran past 58 s",
         "ModelInvocationTimeExceeded"),
        (model_stream_error('copy "a" "closed"', StreamErrorCode.BROKEN), "ModelStreamError", 'copy "a" "closed"',
         "StreamBroken"),
        (internal_stream_failure("gateway bug \u2603"), "InternalStreamFailure", "gateway bug \u2603", None),
    ],
)
def test_exceptions_raise_botocore_event_stream_errors(
    frame: bytes, code: str, message: str, error_code: str | None
) -> None:
    events = runtime_events([payload_part(b"partial"), frame])
    assert next(events) == {"PayloadPart": {"Bytes": b"partial"}}
    with pytest.raises(EventStreamError) as raised:
        next(events)
    error = raised.value.response
    assert error["Error"] == {"Code": code, "Message": message}
    [decoded] = raw_messages(frame)
    assert decoded.headers[":message-type"] == "exception"
    assert json.loads(decoded.payload).get("ErrorCode") == error_code


@pytest.mark.parametrize(
    ("headers", "payload"),
    [({}, b""), ({"a": ""}, b"p"), ({"k" * 255: "v" * 65535}, b"q"), ({"one": "1", "two": "\u00e9"}, b"")],
)
def test_any_string_headers_round_trip(headers: dict[str, str], payload: bytes) -> None:
    [message] = raw_messages(encode_frame(headers, payload))
    assert message.headers == headers and message.payload == payload


def test_checksums_are_checked_by_botocore() -> None:
    frame = bytearray(payload_part(b"hello"))
    frame[-6] ^= 0xFF  # a payload byte: the message crc no longer matches
    with pytest.raises(ChecksumMismatch):
        raw_messages(bytes(frame))


@pytest.mark.parametrize(("headers", "payload"), [({"k" * 256: ""}, b""), ({"k": "v" * 65536}, b"")])
def test_oversized_headers_are_refused(headers: dict[str, str], payload: bytes) -> None:
    with pytest.raises(ValueError, match="too long"):
        encode_frame(headers, payload)
