"""SageMaker's response stream (`application/vnd.amazon.eventstream`): the model's bytes out of the frames.

botocore's decoder checks the framing and CRCs; this keeps the payload of each `PayloadPart` event and turns an
exception frame (`ModelStreamError`, `InternalStreamFailure`) into a RequestFailed the client counts by its code.
"""

from __future__ import annotations

import json

from botocore.eventstream import EventStreamBuffer, EventStreamMessage

from pier.bench.request_record import RequestFailed

CONTENT_TYPE = "application/vnd.amazon.eventstream"


class EventStreamDecoder:
    def __init__(self) -> None:
        self._frames = EventStreamBuffer()

    def feed(self, chunk: bytes) -> bytes:
        """The payload bytes of every complete frame so far; raises RequestFailed on an exception frame."""
        self._frames.add_data(chunk)
        return b"".join(_payload(message) for message in self._frames)


def _payload(message: EventStreamMessage) -> bytes:
    headers = message.headers
    if headers.get(":message-type") in ("exception", "error"):
        kind = headers.get(":exception-type") or headers.get(":error-code") or "StreamError"
        raise RequestFailed(_error_code(kind, message.payload), _error_message(message.payload))
    if headers.get(":event-type") == "PayloadPart":
        return bytes(message.payload)
    return b""


def _error_code(kind: str, payload: bytes) -> str:
    detail = _json(payload).get("ErrorCode")
    return f"{kind}:{detail}" if detail else kind


def _error_message(payload: bytes) -> str:
    body = _json(payload)
    return str(body.get("Message") or body.get("message") or payload[:300].decode(errors="replace"))


def _json(payload: bytes) -> dict[str, object]:
    try:
        value = json.loads(payload)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
