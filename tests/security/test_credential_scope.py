"""A SigV4 credential scope: the route's service and a real region, in AWS's words (pure)."""

from __future__ import annotations

import pytest

from pier.security.credential_scope import check_scope, regions, signing_service
from pier.security.errors import InvalidSignature

FORM = "application/x-www-form-urlencoded; charset=utf-8"


@pytest.mark.parametrize(
    ("region", "service", "expected", "refusal"),
    [
        ("us-east-1", "sagemaker", "sagemaker", None),
        ("eu-central-1", "sagemaker", "sagemaker", None),
        ("cn-north-1", "sagemaker", "sagemaker", None),
        ("us-gov-west-1", "monitoring", "monitoring", None),
        ("us-west-2", "application-autoscaling", "application-autoscaling", None),
        ("us-east-1", "s3", "sagemaker", "Credential should be scoped to correct service: 'sagemaker'."),
        ("us-east-1", "sagemaker", "monitoring", "Credential should be scoped to correct service: 'monitoring'."),
        ("us-east-1", "runtime.sagemaker", "sagemaker", "correct service: 'sagemaker'."),
        ("us-east-1", "SageMaker", "sagemaker", "correct service: 'sagemaker'."),
        ("xx-fake-1", "sagemaker", "sagemaker", "Credential should be scoped to a valid region, not 'xx-fake-1'."),
        ("us-fake-1", "sagemaker", "sagemaker", "valid region, not 'us-fake-1'."),  # fits the pattern, not real
        ("aws-global", "sagemaker", "sagemaker", "valid region, not 'aws-global'."),
        ("US-EAST-1", "sagemaker", "sagemaker", "valid region"),
        ("xx-fake-1", "s3", "sagemaker", "correct service"),  # the service is checked first
    ],
)
def test_check_scope(region: str, service: str, expected: str, refusal: str | None) -> None:
    if refusal is None:
        check_scope(region, service, expected)
        return
    with pytest.raises(InvalidSignature) as raised:
        check_scope(region, service, expected)
    assert refusal in raised.value.message and raised.value.wire.sagemaker_code == "InvalidSignatureException"


def test_regions_are_botocore_s() -> None:
    assert {"us-east-1", "eu-west-1", "ap-southeast-2", "cn-northwest-1", "us-gov-east-1"} <= regions()
    assert not any(region.endswith("-global") for region in regions())


@pytest.mark.parametrize(
    ("path", "target", "content_type", "service"),
    [
        ("/", "SageMaker.ListModels", "application/x-amz-json-1.1", "sagemaker"),
        ("/", "AnyScaleFrontendService.DescribeScalableTargets", "application/x-amz-json-1.1",
         "application-autoscaling"),
        ("/", "GraniteServiceVersion20100801.PutMetricData", "application/x-amz-json-1.0", "monitoring"),
        ("/", None, FORM, "monitoring"),  # CloudWatch's query protocol
        ("/service/GraniteServiceVersion20100801/operation/PutMetricData", None, "application/cbor", "monitoring"),
        ("/endpoints/e/invocations", None, "application/json", "sagemaker"),  # runtime.sagemaker signs as sagemaker
        ("/endpoints/e/invocations-response-stream", None, None, "sagemaker"),
        ("/v1/chat/completions", None, "application/json", "sagemaker"),
        ("/pier/copies", None, None, "sagemaker"),
        ("/", None, "application/x-amz-json-1.1", "sagemaker"),
    ],
)
def test_signing_service(path: str, target: str | None, content_type: str | None, service: str) -> None:
    assert signing_service(path, target, content_type) == service


def test_the_signing_names_are_botocore_s() -> None:
    """What each route's API signs as, read from botocore's models (CloudWatch: no signingName, so its
    endpointPrefix)."""
    import botocore.session

    session = botocore.session.get_session()
    names = {}
    for api in ("sagemaker", "sagemaker-runtime", "application-autoscaling", "cloudwatch"):
        metadata = session.get_service_model(api).metadata
        names[api] = metadata.get("signingName") or metadata["endpointPrefix"]
    assert names == {"sagemaker": "sagemaker", "sagemaker-runtime": "sagemaker",
                     "application-autoscaling": "application-autoscaling", "cloudwatch": "monitoring"}
