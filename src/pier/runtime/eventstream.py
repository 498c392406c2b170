"""AWS event-stream frames, the body of SageMaker's InvokeEndpointWithResponseStream.

botocore ships a decoder and no encoder. A frame is, big-endian:
`total_len u32 | headers_len u32 | crc32(first 8 bytes) u32 | headers | payload | crc32(all before) u32`,
and a header is `name_len u8 | name | type u8 | value_len u16 | value`; SageMaker only sends string
headers (type 7). Data goes in `PayloadPart` events; an error after the 200 goes in an exception frame.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from enum import StrEnum

STRING_HEADER = 7
PRELUDE = struct.Struct(">II")
CRC = struct.Struct(">I")
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024  # botocore refuses bigger frames


class StreamErrorCode(StrEnum):
    """ModelStreamError's ErrorCode values."""

    TIMEOUT = "ModelInvocationTimeExceeded"  # the model did not finish within the allowed time
    BROKEN = "StreamBroken"  # the connection to the model was reset or closed


def encode_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One frame with string headers, in the given order."""
    encoded_headers = b"".join(_header(name, value) for name, value in headers.items())
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"an event-stream payload holds at most {MAX_PAYLOAD_BYTES} bytes; split it into parts")
    total = PRELUDE.size + CRC.size + len(encoded_headers) + len(payload) + CRC.size
    prelude = PRELUDE.pack(total, len(encoded_headers))
    head = prelude + CRC.pack(zlib.crc32(prelude))
    body = head + encoded_headers + payload
    return body + CRC.pack(zlib.crc32(body))


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    if len(raw_name) > 0xFF or len(raw_value) > 0xFFFF:
        raise ValueError(f"event-stream header {name!r} is too long (name ≤ 255 bytes, value ≤ 65535 bytes)")
    return bytes([len(raw_name)]) + raw_name + bytes([STRING_HEADER]) + struct.pack(">H", len(raw_value)) + raw_value


def payload_part(data: bytes) -> bytes:
    """A `PayloadPart` event carrying `data` (a piece of the model's answer)."""
    return encode_frame(
        {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}, data
    )


def model_stream_error(message: str, code: StreamErrorCode) -> bytes:
    """The model failed after the stream began: it ran past its time, or its connection broke."""
    return _exception("ModelStreamError", {"Message": message, "ErrorCode": code.value})


def internal_stream_failure(message: str) -> bytes:
    """The gateway itself failed after the stream began."""
    return _exception("InternalStreamFailure", {"Message": message})


def _exception(kind: str, body: Mapping[str, str]) -> bytes:
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return encode_frame(headers, json.dumps(body).encode())
