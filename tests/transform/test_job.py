from __future__ import annotations

import copy
from typing import Any

import pytest

from pier.control.errors import ValidationError
from pier.transform.job import JobRecord, check, describe

REQUEST: dict[str, Any] = {
    "TransformJobName": "j", "ModelName": "m",
    "TransformInput": {"DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://b/in/"}}},
    "TransformOutput": {"S3OutputPath": "s3://b/out"},
    "TransformResources": {"InstanceType": "local", "InstanceCount": 2},
}


def changed(**members: Any) -> dict[str, Any]:
    request = copy.deepcopy(REQUEST)
    for path, value in members.items():
        *parents, last = path.split("__")
        target = request
        for parent in parents:
            target = target.setdefault(parent, {})
        target[last] = value
    return request


def test_defaults_as_sagemaker_has_them() -> None:
    settings = check(REQUEST)
    assert (settings.split_type, settings.strategy, settings.max_payload_mb, settings.assemble_with) == (
        "None", "SingleRecord", 6, "None")
    assert settings.max_concurrent is None and settings.instance_count == 2 and settings.processing.idle


@pytest.mark.parametrize(("request_", "words"), [
    (changed(TransformInput__SplitType="RecordIO"), "pier splits records by Line or not at all"),
    (changed(TransformInput__DataSource={"S3DataSource": {"S3DataType": "AugmentedManifestFile", "S3Uri": "s3://b/"}}),
     "S3Prefix or ManifestFile"),
    (changed(TransformOutput__S3OutputPath="https://b/out"), "must be an s3://bucket/prefix or file:///path"),
    (changed(TransformInput__DataSource={"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3:///in/"}}),
     "S3Uri 's3:///in/' names no bucket: write s3://BUCKET/"),
    (changed(TransformOutput__S3OutputPath="file://relative/out"), "S3OutputPath .* is not an absolute path"),
    (changed(TransformOutput__S3OutputPath="file:///srv/out/%2e%2e/etc"), r"S3OutputPath .* has a '\.' or '\.\.'"),
    (changed(TransformInput__DataSource={"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "file:///srv/in/../"}}),
     r"S3Uri 'file:///srv/in/../' has a '\.' or '\.\.' segment"),
    (changed(DataCaptureConfig={"DestinationS3Uri": "s3://b/capture"}),
     "pier's transform jobs capture no data: remove DataCaptureConfig"),
    (changed(TransformOutput={"S3OutputPath": "file:///out", "KmsKeyId": "k"}),
     "KmsKeyId encrypts outputs in S3; a file:// S3OutputPath has none"),
    (changed(MaxPayloadInMB=101), "MaxPayloadInMB is at most 100"),
    (changed(MaxPayloadInMB=10, MaxConcurrentTransforms=11), r"\(11 x 10\) may be at most 100"),
    (changed(DataProcessing={"InputFilter": "features"}), "DataProcessing.InputFilter: The JSONPath 'features'"),
])
def test_refusals_say_what_pier_takes(request_: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        check(request_)


def test_describe_echoes_the_request_and_adds_nothing_aws_lacks() -> None:
    import botocore.session

    from pier.control.shapes import ContainerSpec

    job = JobRecord(name="j", arn="arn", created=1.0, modified=2.0, started=1.5, request=changed(BatchStrategy=
                    "MultiRecord"), container=ContainerSpec(ModelDataUrl="/m"))
    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(
        "DescribeTransformJob").output_shape
    described = describe(job)
    assert set(described) <= set(shape.members)
    assert described["BatchStrategy"] == "MultiRecord" and described["TransformStartTime"] == 1.5
    assert "TransformEndTime" not in described and "FailureReason" not in described
