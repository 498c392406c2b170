"""The request InvokeEndpointAsync queues, checked (its InputLocation, or an inline Body; where its answer,
OutputLocation, or its failure, FailureLocation, will be written). The gateway's route
(`pier.gateway.async_route`) queues it and answers 202; pier.async_inference.dispatcher runs it.

Names as SageMaker's: the answer is `<S3OutputPath>[/<S3OutputPathExtension>]/<id>.out` (or the Filename given), the
failure `<S3FailurePath or S3OutputPath>/<id>-error.out`, `<id>` a fresh UUID. Header constraints are those of
botocore's sagemaker-runtime model, worded as SageMaker words them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from pier import storage
from pier.async_inference.queue import AsyncRequest
from pier.control.shapes import AsyncInferenceSpec
from pier.runtime.errors import InvalidInvocation
from pier.runtime.invocation import (
    ACCEPT,
    ATTRIBUTES,
    CONTENT_TYPE,
    ENDPOINT,
    INFERENCE,
    Constraint,
    raise_problems,
)

HEADER = "X-Amzn-SageMaker-"
INPUT_LOCATION = HEADER + "InputLocation"
OUTPUT_LOCATION = HEADER + "OutputLocation"
FAILURE_LOCATION = HEADER + "FailureLocation"
TTL = HEADER + "RequestTTLSeconds"
TIMEOUT = HEADER + "InvocationTimeoutSeconds"
EXTENSION = HEADER + "S3OutputPathExtension"
FILENAME = HEADER + "Filename"
DEFAULT_TTL_S, TTL_RANGE = 21600, (60, 21600)  # 6 hours, as on AWS
DEFAULT_TIMEOUT_S, TIMEOUT_RANGE = 900, (1, 3600)  # 15 minutes
MAX_INLINE_BYTES = 128_000  # AWS's limit on an inline Body

# s3:// only: a caller who may invoke never makes the gateway read its host's files (file:// outputs are the
# operator's, set in the endpoint config). https:// inputs, which AWS also takes, pier does not fetch.
LOCATION = Constraint("inputLocation", 1024, r"^(https|s3)://([^/]+)/?(.*)$", re.compile(r"(https|s3)://[^/]+/?.*"),
                      min_length=1)
# botocore's patterns: no '%' (a file:// output's path is unquoted, so %2e%2e%2f would climb out of its folder), no
# URL as an extension, no two dots in a file name.
PATH_EXTENSION = Constraint("s3OutputPathExtension", 512, r"^(?!s3:|https:)[a-zA-Z0-9!_.*'()/-]+$",
                            re.compile(r"(?!s3:|https:)[a-zA-Z0-9!_.*'()/-]+"), min_length=1)
FILE_NAME = Constraint("filename", 32, r"^(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9-_\.]*$",
                       re.compile(r"(?!.*\..*\.)[a-zA-Z0-9][a-zA-Z0-9\-_.]*"), min_length=1)


def accepted(endpoint: str, headers: Mapping[str, str], body: bytes, config: AsyncInferenceSpec, now: float
             ) -> AsyncRequest:
    """The request to queue, checked; InvalidInvocation (a ValidationError) says what is wrong."""
    values = {name: headers.get(HEADER + header) for name, header in (
        ("content_type", "Content-Type"), ("accept", "Accept"), ("custom_attributes", "Custom-Attributes"),
        ("inference_id", "Inference-Id"), ("input_location", "InputLocation"), ("extension", "S3OutputPathExtension"),
        ("filename", "Filename"))}
    checks = [(ENDPOINT, endpoint), (CONTENT_TYPE, values["content_type"]), (ACCEPT, values["accept"]),
              (ATTRIBUTES, values["custom_attributes"]), (INFERENCE, values["inference_id"]),
              (LOCATION, values["input_location"]), (PATH_EXTENSION, values["extension"]),
              (FILE_NAME, values["filename"])]
    problems = [p for constraint, value in checks if value is not None for p in constraint.problems(value)]
    ttl = _seconds(headers.get(TTL), "requestTTLSeconds", DEFAULT_TTL_S, TTL_RANGE, problems)
    timeout = _seconds(headers.get(TIMEOUT), "invocationTimeoutSeconds", DEFAULT_TIMEOUT_S, TIMEOUT_RANGE, problems)
    raise_problems(problems)
    _check_folder(values["extension"])
    location = values["input_location"]
    if location is not None:
        _check_input(location)
    if (location is None) == (not body):
        raise InvalidInvocation("Give InputLocation (the s3:// URI of the request's payload) or an inline Body, "
                                "exactly one of them.")
    if len(body) > MAX_INLINE_BYTES:
        raise InvalidInvocation(f"The inline Body is {len(body)} bytes; it may be up to {MAX_INLINE_BYTES}. Upload "
                                "larger payloads to S3 and give their InputLocation.")
    id = str(uuid.uuid4())
    output_path = config.OutputConfig.S3OutputPath
    assert output_path is not None  # the shape requires it
    failure_path = config.OutputConfig.S3FailurePath or output_path
    if values["extension"]:
        output_path = storage.join(output_path, values["extension"])
    return AsyncRequest(
        id=id, inference_id=values["inference_id"] or id, endpoint=endpoint,
        output_location=storage.join(output_path, values["filename"] or f"{id}.out"),
        failure_location=storage.join(failure_path, f"{id}-error.out"), received=now, ttl_s=ttl, timeout_s=timeout,
        input_location=location, body=body.decode("latin-1") if location is None else None,
        content_type=values["content_type"], accept=values["accept"], custom_attributes=values["custom_attributes"],
        kms_key=config.OutputConfig.KmsKeyId)


def _check_input(location: str) -> None:
    """What AWS's pattern takes and pier cannot read, refused now rather than failed later with S3's words."""
    if location.startswith("https://"):
        raise InvalidInvocation(f"pier reads InputLocation only from s3:// (AWS also fetches https:// URLs such as "
                                f"{location!r}; pier does not): upload the payload to S3 and give its s3://BUCKET/KEY.")
    if not location.removeprefix("s3://").partition("/")[2]:
        raise InvalidInvocation(f"InputLocation {location!r} names no object: give s3://BUCKET/KEY, the object "
                                "holding the request's payload.")


def _check_folder(extension: str | None) -> None:
    """AWS's pattern lets '.' and '..' be segments; under a file:// S3OutputPath (a folder on the gateway's host) they
    would let whoever may invoke write anywhere the gateway may, so they are refused wherever the output goes."""
    if extension and any(part in (".", "..") for part in extension.split("/")):
        raise InvalidInvocation(f"S3OutputPathExtension {extension!r} has a '.' or '..' segment; it must name a "
                                "folder under the endpoint's S3OutputPath (e.g. 'day1/batch2').")


def _seconds(value: str | None, member: str, default: int, bounds: tuple[int, int], problems: list[str]) -> int:
    if value is None:
        return default
    low, high = bounds
    where = f"Value '{value}' at '{member}' failed to satisfy constraint: Member must"
    if not value.strip().lstrip("-").isdigit():
        problems.append(f"{where} be an integer")
        return default
    number = int(value)
    if number < low:
        problems.append(f"{where} have value greater than or equal to {low}")
    elif number > high:
        problems.append(f"{where} have value less than or equal to {high}")
    return number

