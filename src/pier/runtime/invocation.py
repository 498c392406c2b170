"""One SageMaker runtime call as the gateway received it: InvokeEndpoint or InvokeEndpointWithResponseStream.

botocore checks none of the header values, so they are checked here with SageMaker's own wording.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from dataclasses import dataclass, field

from starlette.requests import Request

from pier.runtime.errors import InvalidInvocation, PayloadTooLarge
from pier.runtime.settings import MAX_PAYLOAD_BYTES

HEADER = "X-Amzn-SageMaker-"
CUSTOM_ATTRIBUTES = HEADER + "Custom-Attributes"
INFERENCE_COMPONENT = HEADER + "Inference-Component"
TARGET_VARIANT = HEADER + "Target-Variant"
INFERENCE_ID = HEADER + "Inference-Id"
SESSION_ID = HEADER + "Session-Id"
STREAM_ACCEPT = HEADER + "Accept"
STREAM_CONTENT_TYPE = HEADER + "Content-Type"
INVOKED_VARIANT = "x-Amzn-Invoked-Production-Variant"

ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
COMPONENT_NAME = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$")
VISIBLE_ASCII = re.compile(r"^[\x20-\x7e]*$")


@dataclass(frozen=True)
class Invocation:
    endpoint: str
    body: bytes
    content_type: str | None = None
    accept: str | None = None  # Accept, or X-Amzn-SageMaker-Accept on the streaming route
    custom_attributes: str | None = None
    component: str | None = None  # X-Amzn-SageMaker-Inference-Component
    variant: str | None = None  # X-Amzn-SageMaker-Target-Variant
    inference_id: str | None = None
    session_id: str | None = None
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    received_at: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    def __post_init__(self) -> None:
        check_member("endpointName", self.endpoint, ENDPOINT_NAME, 63)
        if self.component is not None:
            check_member("inferenceComponentName", self.component, COMPONENT_NAME, 63)
        if self.variant is not None:
            check_member("targetVariant", self.variant, ENDPOINT_NAME, 63)
        if self.custom_attributes is not None:
            check_member("customAttributes", self.custom_attributes, VISIBLE_ASCII, 1024)
        if self.inference_id is not None:
            check_member("inferenceId", self.inference_id, VISIBLE_ASCII, 64)

    def upstream_headers(self) -> dict[str, str]:
        """What the copy is told: the same headers SageMaker passes to a container."""
        headers = {"X-Amzn-RequestId": self.request_id}
        for name, value in [
            ("Content-Type", self.content_type), ("Accept", self.accept), (CUSTOM_ATTRIBUTES, self.custom_attributes),
            (INFERENCE_ID, self.inference_id), (SESSION_ID, self.session_id),
        ]:
            if value is not None:
                headers[name] = value
        return headers

    @classmethod
    async def from_request(cls, endpoint: str, request: Request, *, stream: bool = False,
                           limit: int = MAX_PAYLOAD_BYTES, request_id: str | None = None) -> Invocation:
        received_at = asyncio.get_running_loop().time()
        headers = request.headers
        return cls(
            endpoint=endpoint, body=await read_body(request, limit), content_type=headers.get("content-type"),
            accept=headers.get(STREAM_ACCEPT if stream else "accept"), custom_attributes=headers.get(CUSTOM_ATTRIBUTES),
            component=headers.get(INFERENCE_COMPONENT), variant=headers.get(TARGET_VARIANT),
            inference_id=headers.get(INFERENCE_ID), session_id=headers.get(SESSION_ID),
            request_id=request_id or str(uuid.uuid4()), received_at=received_at,
        )


def check_member(member: str, value: str, pattern: re.Pattern[str], max_length: int) -> None:
    if len(value) > max_length:
        raise InvalidInvocation(
            f"1 validation error detected: Value '{value[:80]}' at '{member}' failed to satisfy constraint: "
            f"Member must have length less than or equal to {max_length}"
        )
    if not pattern.match(value):
        raise InvalidInvocation(
            f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
            f"Member must satisfy regular expression pattern: {pattern.pattern}"
        )


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body, refused with 413 as soon as it is known to be over `limit` (declared or counted)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(size: int, limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"The request body is {size} bytes or more; the limit is {limit} bytes (6 MiB, SageMaker's payload limit). "
        "Send a shorter payload, or split the work over several requests."
    )
