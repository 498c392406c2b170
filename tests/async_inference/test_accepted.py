"""InvokeEndpointAsync's headers checked and turned into the request that is queued, with SageMaker's names."""

from __future__ import annotations

import re

import pytest

from pier.async_inference.accepted import accepted
from pier.control.shapes import AsyncInferenceSpec
from pier.runtime.errors import InvalidInvocation

H = "X-Amzn-SageMaker-"
CONFIG = AsyncInferenceSpec.model_validate({"OutputConfig": {"S3OutputPath": "s3://b/out/",
                                                             "S3FailurePath": "s3://b/failed"}})
UUID = "[0-9a-f-]{36}"


def test_an_input_location_gets_named_output_and_failure_locations_and_the_defaults() -> None:
    queued = accepted("e", {H + "InputLocation": "s3://b/in.json", H + "Content-Type": "application/json",
                            H + "Custom-Attributes": "trace=1"}, b"", CONFIG, 100.0)
    assert re.fullmatch(rf"s3://b/out/{UUID}\.out", queued.output_location)
    assert queued.failure_location == f"s3://b/failed/{queued.id}-error.out"
    assert queued.output_location == f"s3://b/out/{queued.id}.out"
    assert queued.inference_id == queued.id  # generated when not given, as SageMaker does
    assert (queued.ttl_s, queued.timeout_s, queued.received) == (21600, 900, 100.0)
    assert (queued.content_type, queued.custom_attributes, queued.body) == ("application/json", "trace=1", None)


def test_filename_extension_ids_and_limits_are_taken() -> None:
    queued = accepted("e", {H + "InputLocation": "s3://b/in.json", H + "Inference-Id": "mine",
                            H + "S3OutputPathExtension": "day1", H + "Filename": "answer.json",
                            H + "RequestTTLSeconds": "60", H + "InvocationTimeoutSeconds": "3600"}, b"", CONFIG, 0.0)
    assert queued.output_location == "s3://b/out/day1/answer.json"
    assert queued.failure_location.startswith("s3://b/failed/")
    assert (queued.inference_id, queued.ttl_s, queued.timeout_s) == ("mine", 60, 3600)


def test_an_inline_body_is_queued_with_the_request() -> None:
    queued = accepted("e", {}, b"\x00\xff{}", CONFIG, 0.0)
    assert queued.input_location is None and queued.body is not None
    assert queued.body.encode("latin-1") == b"\x00\xff{}"


@pytest.mark.parametrize(("headers", "body", "problem"), [
    ({}, b"", "Give InputLocation .* or an inline Body, exactly one"),
    ({H + "InputLocation": "s3://b/x"}, b"{}", "exactly one"),
    ({H + "InputLocation": "http://b/x"}, b"", "at 'inputLocation' failed to satisfy constraint"),
    # AWS's pattern takes these; pier says why it cannot and what to give instead
    ({H + "InputLocation": "https://b.s3.amazonaws.com/x"}, b"",
     "pier reads InputLocation only from s3://.*upload the payload to S3"),
    ({H + "InputLocation": "s3://b"}, b"", "InputLocation 's3://b' names no object: give s3://BUCKET/KEY"),
    ({H + "InputLocation": "s3://b/"}, b"", "names no object"),
    ({H + "InputLocation": "file:///etc/passwd"}, b"", "at 'inputLocation' failed to satisfy constraint"),
    ({H + "InputLocation": "s3://b/x", H + "RequestTTLSeconds": "59"}, b"",
     "requestTTLSeconds' failed to satisfy constraint: Member must have value greater than or equal to 60"),
    ({H + "InputLocation": "s3://b/x", H + "InvocationTimeoutSeconds": "3601"}, b"",
     "invocationTimeoutSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600"),
    ({H + "InputLocation": "s3://b/x", H + "InvocationTimeoutSeconds": "soon"}, b"", "be an integer"),
    ({H + "InputLocation": "s3://b/x", H + "Filename": "a/b"}, b"", "at 'filename'"),
    ({}, b"x" * 128_001, "The inline Body is 128001 bytes; it may be up to 128000"),
    # botocore's patterns: no '%' (a file:// output's path is unquoted), no two dots in a name, at most 32 and 512
    ({H + "InputLocation": "s3://b/x", H + "Filename": "%2e%2e%2fx"}, b"", "at 'filename'"),
    ({H + "InputLocation": "s3://b/x", H + "Filename": ".."}, b"", "at 'filename'"),
    ({H + "InputLocation": "s3://b/x", H + "Filename": "a" * 33}, b"", "length less than or equal to 32"),
    ({H + "InputLocation": "s3://b/x", H + "S3OutputPathExtension": "%2e%2e"}, b"", "at 's3OutputPathExtension'"),
    ({H + "InputLocation": "s3://b/x", H + "S3OutputPathExtension": "s3://other/x"}, b"",
     "at 's3OutputPathExtension'"),
    ({H + "InputLocation": "s3://b/x", H + "S3OutputPathExtension": "a" * 513}, b"",
     "length less than or equal to 512"),
])
def test_bad_calls_are_validation_errors_that_say_what_to_fix(headers: dict[str, str], body: bytes,
                                                              problem: str) -> None:
    with pytest.raises(InvalidInvocation, match=problem):
        accepted("e", headers, body, CONFIG, 0.0)


@pytest.mark.parametrize("extension", ["..", "../../etc", "day1/../..", "./x/."])
def test_an_extension_that_leaves_the_output_folder_is_refused(extension: str) -> None:
    """A file:// S3OutputPath is a folder on the gateway's host: an invoker must not write outside it."""
    with pytest.raises(InvalidInvocation, match=r"S3OutputPathExtension .* folder under the endpoint's S3OutputPath"):
        accepted("e", {H + "InputLocation": "s3://b/x", H + "S3OutputPathExtension": extension}, b"", CONFIG, 0.0)


def test_the_configs_kms_key_goes_with_the_request() -> None:
    config = AsyncInferenceSpec.model_validate({"OutputConfig": {"S3OutputPath": "s3://b/out", "KmsKeyId": "alias/k"}})
    assert accepted("e", {H + "InputLocation": "s3://b/x"}, b"", config, 0.0).kms_key == "alias/k"
    assert accepted("e", {H + "InputLocation": "s3://b/x"}, b"", CONFIG, 0.0).kms_key is None


def test_a_kms_key_for_a_local_folder_is_refused() -> None:
    """A file:// folder has no server-side encryption: the key would be silently unused."""
    with pytest.raises(ValueError, match="KmsKeyId encrypts outputs in S3; a file:// path has none"):
        AsyncInferenceSpec.model_validate({"OutputConfig": {"S3OutputPath": "file:///tmp/out", "KmsKeyId": "k"}})


@pytest.mark.parametrize("member", ["S3OutputPath", "S3FailurePath"])
def test_a_local_folder_with_a_dot_dot_segment_is_refused(member: str) -> None:
    """Decided as every file:// path of pier (pier.host_path): '%2e%2e' is a '..' segment, refused, not resolved."""
    paths = {"S3OutputPath": "file:///srv/out", member: "file:///srv/out/%2e%2e/%2e%2e/etc"}
    with pytest.raises(ValueError, match=rf"{member} 'file:///srv/out/%2e%2e/%2e%2e/etc' has a '\.' or '\.\.' "
                                         "segment once percent-decoded"):
        AsyncInferenceSpec.model_validate({"OutputConfig": paths})
