"""Whether a SigV4 signature was made for this service, in a real region, as AWS checks before the signature
itself: a signature for `s3`, or for `xx-fake-1`, is no signature for SageMaker, whatever its key.

The service is the signing name botocore's model gives the API a route serves (SageMaker's control plane and
runtime both sign as `sagemaker`; Application Auto Scaling as `application-autoscaling`; CloudWatch has no
signingName, so it signs with its endpoint prefix `monitoring`). The regions are those of botocore's partitions.
"""

from __future__ import annotations

from functools import cache

import botocore.loaders

from pier.dialect import AUTOSCALING_TARGET, CBOR_PATH, CLOUDWATCH_TARGET
from pier.security.errors import InvalidSignature

SAGEMAKER = "sagemaker"
APPLICATION_AUTOSCALING = "application-autoscaling"
MONITORING = "monitoring"


@cache
def regions() -> frozenset[str]:
    """Every region of every AWS partition botocore knows (not the `aws-global` pseudo-regions: AWS refuses them)."""
    endpoints = botocore.loaders.create_loader().load_data("endpoints")
    return frozenset(region for partition in endpoints["partitions"] for region in partition["regions"])


def check_scope(region: str, service: str, expected_service: str) -> None:
    """Raise InvalidSignature, in AWS's words, unless the credential scope names `expected_service` and a real
    region."""
    if service != expected_service:
        raise InvalidSignature(
            f"Credential should be scoped to correct service: '{expected_service}'. This pier route serves "
            f"{expected_service}; sign for it (boto3 does when the client is for that service), not for "
            f"'{service[:40]}'.")
    if region not in regions():
        raise InvalidSignature(
            f"Credential should be scoped to a valid region, not '{region[:40]}'. Give the client an AWS region "
            "name (region_name='us-east-1', AWS_DEFAULT_REGION or the profile's region).")


def signing_service(path: str, target: str | None, content_type: str | None) -> str:
    """The service a SigV4 signature for this call must be scoped to: what botocore signs the API as."""
    if path.startswith(CBOR_PATH):
        return MONITORING
    if path == "/":
        prefix = (target or "").partition(".")[0]
        if prefix == AUTOSCALING_TARGET:
            return APPLICATION_AUTOSCALING
        if prefix == CLOUDWATCH_TARGET:
            return MONITORING
        if not target and (content_type or "").startswith("application/x-www-form-urlencoded"):
            return MONITORING  # CloudWatch's query protocol (older botocore)
    return SAGEMAKER  # the SageMaker control plane and runtime, the OpenAI routes and pier's own (the CLI signs so)
