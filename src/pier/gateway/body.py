"""Reading a control-plane request's body no further than the control plane's limit: a client may send anything,
of any size, and the AWS-shaped APIs at the gateway (SageMaker, Application Auto Scaling, CloudWatch) all refuse
past the same bound before parsing. A gzipped body (botocore compresses CloudWatch's PutMetricData past 10 KB) is
refused past the same bound as sent and past `MAX_DECODED_BYTES` once inflated, so a small bomb cannot grow into
gigabytes."""

from __future__ import annotations

import zlib

from fastapi import Request

from pier.control.errors import ValidationError
from pier.control.request_limits import MAX_BODY_BYTES, body_too_large

MAX_DECODED_BYTES = 4 * MAX_BODY_BYTES  # a full PutMetricData (1000 metrics of 150 values and counts) in JSON


async def read_body(request: Request) -> bytes:
    """The body; a declared or streamed size past the limit raises the control plane's ValidationException."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise body_too_large(int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise body_too_large(size)
        chunks.append(chunk)
    return b"".join(chunks)


def decoded(raw: bytes, encoding: str) -> bytes:
    """`raw` without its Content-Encoding (none, identity or gzip), at most MAX_DECODED_BYTES."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return raw
    if name != "gzip":
        raise ValidationError(f"Content-Encoding {encoding!r} is not supported; send the body as it is, or gzip.")
    inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        body = inflate.decompress(raw, MAX_DECODED_BYTES + 1)
    except zlib.error as error:
        raise ValidationError(f"The body is not valid gzip ({error}); send it as it is, or gzip it whole.") from None
    if len(body) > MAX_DECODED_BYTES:
        raise ValidationError(f"The gzipped body is over {MAX_DECODED_BYTES} bytes once decompressed, the most a "
                              "request may carry; split it over several calls.")
    if not inflate.eof:
        raise ValidationError("The gzipped body ends before its gzip stream does; send it whole.")
    return body
