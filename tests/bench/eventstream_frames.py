"""An encoder for AWS event-stream frames (botocore has only the decoder), for tests of SageMaker's stream."""

from __future__ import annotations

import struct
import zlib

STRING = 7


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    encoded = b"".join(
        struct.pack(">B", len(name)) + name.encode() + struct.pack(">BH", STRING, len(value)) + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + encoded + payload
    return head + struct.pack(">I", zlib.crc32(head))


def payload_part(data: bytes) -> bytes:
    return frame(
        {":message-type": "event", ":event-type": "PayloadPart", ":content-type": "application/octet-stream"}, data
    )


def model_stream_error(message: str, code: str = "ModelInvocationTimeExceeded") -> bytes:
    body = f'{{"Message": "{message}", "ErrorCode": "{code}"}}'.encode()
    return frame(
        {":message-type": "exception", ":exception-type": "ModelStreamError", ":content-type": "application/json"}, body
    )
