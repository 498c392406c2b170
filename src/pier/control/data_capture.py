"""An endpoint config's DataCaptureConfig: the request shape, checked where pier would fail later, and the
summary DescribeEndpoint shows (DataCaptureConfigSummary). The capturing itself is pier.capture's."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Annotated, Any, Literal
from urllib.parse import urlparse

from pydantic import Field, StringConstraints, model_validator

from pier import host_path
from pier.control.shape import Shape

ContentType = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class CaptureOptionSpec(Shape):
    CaptureMode: Literal["Input", "Output", "InputAndOutput"]


class CaptureContentTypeHeaderSpec(Shape):
    CsvContentTypes: Annotated[list[ContentType], Field(min_length=1, max_length=10)] | None = None
    JsonContentTypes: Annotated[list[ContentType], Field(min_length=1, max_length=10)] | None = None


class DataCaptureSpec(Shape):
    EnableCapture: bool | None = None  # AWS: enabled unless it says false
    InitialSamplingPercentage: Annotated[int, Field(ge=0, le=100)]
    DestinationS3Uri: Annotated[str, StringConstraints(min_length=1, max_length=512)]
    KmsKeyId: Annotated[str, StringConstraints(max_length=2048)] | None = None
    CaptureOptions: Annotated[list[CaptureOptionSpec], Field(min_length=1, max_length=2)]
    CaptureContentTypeHeader: CaptureContentTypeHeaderSpec | None = None

    @model_validator(mode="after")
    def _destination(self) -> DataCaptureSpec:
        problem = destination_problem(self.DestinationS3Uri, self.KmsKeyId)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def enabled(self) -> bool:
        return self.EnableCapture is not False

    @property
    def modes(self) -> frozenset[str]:
        """Which sides are captured: {"Input"}, {"Output"} or both."""
        sides: set[str] = set()
        for option in self.CaptureOptions:
            sides |= {"Input", "Output"} if option.CaptureMode == "InputAndOutput" else {option.CaptureMode}
        return frozenset(sides)


def destination_problem(uri: str, kms_key: str | None) -> str:
    """Why pier cannot write captured data to `uri` ("" when it can): s3://bucket[/prefix] through boto3 (any
    S3-compatible store, AWS_ENDPOINT_URL_S3), or file:///absolute/folder on the gateway's host."""
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        return "" if parsed.netloc else f"DestinationS3Uri {uri!r} names no bucket: give s3://BUCKET/PREFIX."
    if parsed.scheme == "file":
        if parsed.netloc or not PurePosixPath(parsed.path).is_absolute():
            return (f"DestinationS3Uri {uri!r} is not a file:/// URL of an absolute folder: give "
                    "file:///ABSOLUTE/FOLDER (three slashes).")
        try:
            host_path.of_url(uri)
        except host_path.PathRefused as error:
            return f"DestinationS3Uri {error}"
        if kms_key:
            return ("KmsKeyId encrypts captured data with S3 server-side encryption; a file:// destination has none: "
                    "remove KmsKeyId, or capture to an s3:// destination.")
        return ""
    return (f"DestinationS3Uri {uri!r}: pier captures to s3://BUCKET/PREFIX (through boto3; AWS_ENDPOINT_URL_S3 picks "
            "an S3-compatible store) or file:///ABSOLUTE/FOLDER on the gateway's host.")


def summary(spec: DataCaptureSpec) -> dict[str, Any]:
    """DescribeEndpoint's DataCaptureConfig (DataCaptureConfigSummary)."""
    described: dict[str, Any] = {
        "EnableCapture": spec.enabled,
        "CaptureStatus": "Started" if spec.enabled else "Stopped",
        "CurrentSamplingPercentage": spec.InitialSamplingPercentage,
        "DestinationS3Uri": spec.DestinationS3Uri,
        "KmsKeyId": spec.KmsKeyId or "",  # botocore's summary always has one; "" when none encrypts the data
    }
    return described
