"""One SageMaker runtime call as the gateway received it: InvokeEndpoint or InvokeEndpointWithResponseStream.

botocore checks only the lower bounds of its parameters' lengths, so every constraint of its `sagemaker-runtime`
model (botocore/data/sagemaker-runtime/2017-05-13/service-2.json) is checked here, and answered as SageMaker's
validation layer words it: "N validation error(s) detected: Value 'v' at 'member' failed to satisfy constraint:
Member must ...", the value left out for members the model marks sensitive.
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
TARGET_MODEL = HEADER + "Target-Model"
TARGET_CONTAINER_HOSTNAME = HEADER + "Target-Container-Hostname"
INFERENCE_ID = HEADER + "Inference-Id"
ENABLE_EXPLANATIONS = HEADER + "Enable-Explanations"
SESSION_ID = HEADER + "Session-Id"
PREFIX_AWARE_ID = HEADER + "Prefix-Aware-Id"  # a routing hint for PREFIX_AWARE variants (pier.runtime.routing_strategy)
STREAM_ACCEPT = HEADER + "Accept"
STREAM_CONTENT_TYPE = HEADER + "Content-Type"
INVOKED_VARIANT = "x-Amzn-Invoked-Production-Variant"

COMPONENT_NAME = re.compile(r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$")


@dataclass(frozen=True)
class Constraint:
    """One member's constraints, as botocore's model states them."""

    member: str  # as SageMaker names it in its messages
    max_length: int
    pattern: str  # as the model writes it, quoted in the message
    regex: re.Pattern[str]  # what it means, matched against the whole value
    min_length: int = 0
    sensitive: bool = False  # the model's `sensitive`: the value is not repeated in the message

    def problems(self, value: str) -> list[str]:
        shown = "Value" if self.sensitive else f"Value '{value[:80]}'"
        where = f"{shown} at '{self.member}' failed to satisfy constraint: Member must"
        found = []
        if len(value) > self.max_length:
            found.append(f"{where} have length less than or equal to {self.max_length}")
        if len(value) < self.min_length:
            found.append(f"{where} have length greater than or equal to {self.min_length}")
        if not self.regex.fullmatch(value):
            found.append(f"{where} satisfy regular expression pattern: {self.pattern}")
        return found


_NAME = r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*"
_NAME_REGEX = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*")
_PRINTABLE = r"\A\S[\p{Print}]*\z"
_PRINTABLE_REGEX = re.compile(r"\S[\x20-\x7e]*")
_ASCII = r"\p{ASCII}*"
_ASCII_REGEX = re.compile(r"[\x00-\x7f]*")

ENDPOINT = Constraint("endpointName", 63, _NAME, _NAME_REGEX)
COMPONENT = Constraint("inferenceComponentName", 63, COMPONENT_NAME.pattern, COMPONENT_NAME)
VARIANT = Constraint("targetVariant", 63, _NAME, _NAME_REGEX)
CONTAINER_HOSTNAME = Constraint("targetContainerHostname", 63, _NAME, _NAME_REGEX)
TARGET = Constraint("targetModel", 1024, _PRINTABLE, _PRINTABLE_REGEX, min_length=1)
INFERENCE = Constraint("inferenceId", 64, _PRINTABLE, _PRINTABLE_REGEX, min_length=1)
PREFIX_ID = Constraint("prefixAwareId", 64, _PRINTABLE, _PRINTABLE_REGEX, min_length=1)
ATTRIBUTES = Constraint("customAttributes", 1024, _ASCII, _ASCII_REGEX, sensitive=True)
CONTENT_TYPE = Constraint("contentType", 1024, _ASCII, _ASCII_REGEX)
ACCEPT = Constraint("accept", 1024, _ASCII, _ASCII_REGEX)
EXPLANATIONS = Constraint("enableExplanations", 64, ".*", re.compile(".*"), min_length=1)
# InvokeEndpoint may open a session (NEW_SESSION); InvokeEndpointWithResponseStream may only name one.
SESSION = Constraint("sessionId", 256, r"^(NEW_SESSION)$|^[a-zA-Z0-9](-*[a-zA-Z0-9])*$",
                     re.compile(r"NEW_SESSION|[a-zA-Z0-9](-*[a-zA-Z0-9])*"))
STREAM_SESSION = Constraint("sessionId", 256, r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$", _NAME_REGEX)


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
    target_model: str | None = None  # multi-model endpoints only (pier.runtime.target_model)
    target_container_hostname: str | None = None  # multi-container endpoints only: pier has none
    enable_explanations: str | None = None  # SageMaker Clarify's: accepted, not acted on
    prefix_aware_id: str | None = None  # X-Amzn-SageMaker-Prefix-Aware-Id: part of a PREFIX_AWARE route's key
    stream: bool = False
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    received_at: float = field(default_factory=lambda: asyncio.get_running_loop().time())

    def __post_init__(self) -> None:
        checks = [
            (ENDPOINT, self.endpoint), (COMPONENT, self.component), (VARIANT, self.variant),
            (CONTAINER_HOSTNAME, self.target_container_hostname), (TARGET, self.target_model),
            (INFERENCE, self.inference_id), (ATTRIBUTES, self.custom_attributes),
            (CONTENT_TYPE, self.content_type), (ACCEPT, self.accept), (EXPLANATIONS, self.enable_explanations),
            (PREFIX_ID, self.prefix_aware_id),
            (STREAM_SESSION if self.stream else SESSION, self.session_id),
        ]
        raise_problems([p for constraint, value in checks if value is not None for p in constraint.problems(value)])

    def upstream_headers(self) -> dict[str, str]:
        """What the copy is told: the same headers SageMaker passes to a container."""
        headers = {"X-Amzn-RequestId": self.request_id}
        for name, value in [
            ("Content-Type", self.content_type), ("Accept", self.accept), (CUSTOM_ATTRIBUTES, self.custom_attributes),
            (INFERENCE_ID, self.inference_id), (SESSION_ID, self.session_id), (TARGET_MODEL, self.target_model),
        ]:
            if value is not None:
                headers[name] = value
        return headers

    def unsupported(self) -> InvalidInvocation | None:
        """What this call asks of the endpoint that pier's endpoints never are (once the endpoint is known)."""
        if self.target_container_hostname is not None:
            # pier's words: SageMaker answers a ValidationError here, in words not known.
            return InvalidInvocation(
                f"Endpoint {self.endpoint} is not a multi-container endpoint configured for direct invocation: drop "
                f"TargetContainerHostname ({self.target_container_hostname}).")
        return None

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
            target_model=headers.get(TARGET_MODEL), target_container_hostname=headers.get(TARGET_CONTAINER_HOSTNAME),
            enable_explanations=headers.get(ENABLE_EXPLANATIONS), prefix_aware_id=headers.get(PREFIX_AWARE_ID),
            stream=stream,
            request_id=request_id or str(uuid.uuid4()), received_at=received_at,
        )


def raise_problems(problems: list[str]) -> None:
    if problems:
        count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''} detected"
        raise InvalidInvocation(f"{count}: {'; '.join(problems)}")


def check_member(constraint: Constraint, value: str) -> None:
    raise_problems(constraint.problems(value))


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
