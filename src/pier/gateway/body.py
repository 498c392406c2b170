"""Reading a control-plane request's body no further than the control plane's limit: a client may send anything,
of any size, and the AWS-shaped APIs at the gateway (SageMaker, Application Auto Scaling, CloudWatch) all refuse
past the same bound before parsing."""

from __future__ import annotations

from fastapi import Request

from pier.control.limits import MAX_BODY_BYTES, body_too_large


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
