"""A transform job as pier keeps it (`JobRecord`) and reads it (`Settings`): CreateTransformJob's request
checked once, beyond what botocore's model checks, with each refusal saying what pier takes instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pier.control.errors import ValidationError
from pier.control.shapes import ContainerSpec
from pier.transform.job_objects import LocationError, check_url
from pier.transform.jsonpath import JsonPathError, parse
from pier.transform.processing import Processing

JobStatus = Literal["InProgress", "Completed", "Failed", "Stopping", "Stopped"]
RUNNING = frozenset({"InProgress", "Stopping"})
VARIANT = "AllTraffic"
MAX_PAYLOAD_MB = 100  # SageMaker's bound on MaxPayloadInMB, and on it times MaxConcurrentTransforms
DEFAULT_PAYLOAD_MB = 6


class JobRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arn: str
    created: float
    modified: float
    status: JobStatus = "InProgress"
    failure_reason: str = ""
    started: float | None = None  # TransformStartTime: its copies were ready and records began to flow
    ended: float | None = None
    request: dict[str, Any]  # CreateTransformJob's request as given (Describe echoes it)
    container: ContainerSpec  # the model's container when the job was made, the job's Environment over it

    @property
    def endpoint_name(self) -> str:
        """The name its copies go by: a dot can be in no endpoint's name, so it never clashes with one."""
        return f"transform.{self.name.lower()}"


@dataclass(frozen=True)
class Settings:
    data_type: str
    input_url: str
    content_type: str | None
    split_type: str
    compression: str
    strategy: str
    max_payload_mb: int
    max_concurrent: int | None  # None: every parallel sequence of every copy
    output_url: str
    kms_key: str | None  # TransformOutput.KmsKeyId: outputs are encrypted with it (SSE-KMS)
    accept: str | None
    assemble_with: str
    processing: Processing
    instance_type: str
    instance_count: int

    @classmethod
    def of(cls, request: dict[str, Any]) -> Settings:
        given_input, output = request["TransformInput"], request["TransformOutput"]
        source = given_input["DataSource"]["S3DataSource"]
        resources = request["TransformResources"]
        return cls(
            data_type=source["S3DataType"], input_url=source["S3Uri"],
            content_type=given_input.get("ContentType"), split_type=given_input.get("SplitType", "None"),
            compression=given_input.get("CompressionType", "None"),
            strategy=request.get("BatchStrategy", "SingleRecord"),
            max_payload_mb=request.get("MaxPayloadInMB", DEFAULT_PAYLOAD_MB),
            max_concurrent=request.get("MaxConcurrentTransforms") or None,
            output_url=output["S3OutputPath"], kms_key=output.get("KmsKeyId") or None, accept=output.get("Accept"),
            assemble_with=output.get("AssembleWith", "None"),
            processing=Processing.of(request.get("DataProcessing"), given_input.get("ContentType")),
            instance_type=resources["InstanceType"], instance_count=resources["InstanceCount"])


def check(request: dict[str, Any]) -> Settings:
    """The request's settings, or a ValidationException naming what pier cannot do with it."""
    problems = list(_problems(request))
    if problems:
        raise ValidationError("; ".join(problems))
    return Settings.of(request)


def _problems(request: dict[str, Any]) -> list[str]:
    given_input = request["TransformInput"]
    source = given_input["DataSource"]["S3DataSource"]
    found = []
    if source["S3DataType"] not in ("S3Prefix", "ManifestFile"):
        found.append(f"pier reads S3DataType S3Prefix or ManifestFile, not {source['S3DataType']}")
    if given_input.get("SplitType", "None") not in ("None", "Line"):
        found.append(f"pier splits records by Line or not at all (None), not {given_input['SplitType']}")
    for member, url in (("TransformInput.DataSource.S3DataSource.S3Uri", source["S3Uri"]),
                        ("TransformOutput.S3OutputPath", request["TransformOutput"]["S3OutputPath"])):
        try:
            check_url(url, member)
        except LocationError as error:
            found.append(str(error).rstrip("."))
    output = request["TransformOutput"]
    if output.get("KmsKeyId") and output["S3OutputPath"].startswith("file:"):  # refused: it would go unused
        found.append("KmsKeyId encrypts outputs in S3; a file:// S3OutputPath has none: remove KmsKeyId, or write "
                     "to s3://")
    if request.get("DataCaptureConfig"):  # refused, not ignored: nothing would ever be written where it says
        found.append("pier's transform jobs capture no data: remove DataCaptureConfig (the outputs are at "
                     "TransformOutput.S3OutputPath; DataProcessing.JoinSource Input puts each input beside its output)")
    payload = request.get("MaxPayloadInMB", DEFAULT_PAYLOAD_MB)
    concurrent = request.get("MaxConcurrentTransforms") or 0
    if payload > MAX_PAYLOAD_MB:
        found.append(f"MaxPayloadInMB is at most {MAX_PAYLOAD_MB}")
    elif concurrent and payload * concurrent > MAX_PAYLOAD_MB:
        found.append(f"MaxConcurrentTransforms x MaxPayloadInMB ({concurrent} x {payload}) may be at most "
                     f"{MAX_PAYLOAD_MB}: lower one of them")
    for member in ("InputFilter", "OutputFilter"):
        text = (request.get("DataProcessing") or {}).get(member)
        if text:
            try:
                parse(text)
            except JsonPathError as error:
                found.append(f"DataProcessing.{member}: {error}".rstrip("."))
    return found


def describe(job: JobRecord) -> dict[str, Any]:
    """DescribeTransformJob's answer: the request as given, with the status and times; nothing AWS lacks."""
    echoed: dict[str, Any] = {key: job.request[key] for key in (
        "ModelName", "MaxConcurrentTransforms", "ModelClientConfig", "MaxPayloadInMB", "BatchStrategy",
        "Environment", "TransformInput", "TransformOutput", "DataCaptureConfig", "TransformResources",
        "DataProcessing", "ExperimentConfig") if key in job.request}
    times = {"TransformStartTime": job.started, "TransformEndTime": job.ended}
    return {"TransformJobName": job.name, "TransformJobArn": job.arn, "TransformJobStatus": job.status,
            **({"FailureReason": job.failure_reason} if job.failure_reason else {}),
            **echoed, "CreationTime": job.created, **{k: v for k, v in times.items() if v is not None}}


def summary(job: JobRecord) -> dict[str, Any]:
    return {"TransformJobName": job.name, "TransformJobArn": job.arn, "CreationTime": job.created,
            "LastModifiedTime": job.modified, "TransformJobStatus": job.status,
            **({"TransformEndTime": job.ended} if job.ended is not None else {}),
            **({"FailureReason": job.failure_reason} if job.failure_reason else {})}
