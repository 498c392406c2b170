"""The frames between the server and a handler worker: length-prefixed JSON metadata and a raw body, over the
worker's stdin and stdout."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

_SIZES = struct.Struct("!II")  # metadata length, body length
PARENT_ENV = "PIER_WORKER_PARENT"  # the server's pid, in the worker's environment: the worker dies with it


@dataclass(frozen=True)
class WorkerRequest:
    """One request, server -> worker."""

    body: bytes
    content_type: str
    accept: str
    custom_attributes: str | None = None
    request_id: str = ""

    def to_frame(self) -> bytes:
        meta = {"content_type": self.content_type, "accept": self.accept,
                "custom_attributes": self.custom_attributes, "request_id": self.request_id}
        return pack(meta, self.body)

    @classmethod
    def from_frame(cls, meta: Mapping[str, Any], body: bytes) -> WorkerRequest:
        return cls(body, meta["content_type"], meta["accept"], meta["custom_attributes"], meta["request_id"])

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": self.content_type, "Accept": self.accept}
        if self.custom_attributes is not None:
            headers["X-Amzn-SageMaker-Custom-Attributes"] = self.custom_attributes
        return headers


@dataclass(frozen=True)
class WorkerReply:
    """Worker -> server: the answer to a WorkerRequest, or (the first frame) whether loading worked."""

    status: int = 200
    body: bytes = b""
    content_type: str = ""
    error: str = ""

    def to_frame(self) -> bytes:
        meta = {"status": self.status, "content_type": self.content_type, "error": self.error}
        return pack(meta, self.body)

    @classmethod
    def from_frame(cls, meta: Mapping[str, Any], body: bytes) -> WorkerReply:
        return cls(meta["status"], body, meta["content_type"], meta["error"])


def pack(meta: Mapping[str, Any], body: bytes = b"") -> bytes:
    encoded = json.dumps(meta).encode("utf-8")
    return _SIZES.pack(len(encoded), len(body)) + encoded + body


def unpack_sizes(head: bytes) -> tuple[int, int]:
    meta_len, body_len = _SIZES.unpack(head)
    return meta_len, body_len


HEAD_SIZE = _SIZES.size


def read_frame(stream: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """The next frame, or None when the server closed the pipe (time to exit)."""
    head = stream.read(HEAD_SIZE)
    if len(head) < HEAD_SIZE:
        return None
    meta_len, body_len = unpack_sizes(head)
    return json.loads(stream.read(meta_len)), stream.read(body_len)
