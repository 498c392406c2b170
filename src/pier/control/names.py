"""Resource names and ARNs as SageMaker writes them. botocore checks neither, so the server must."""

from __future__ import annotations

import re
from typing import Final

# Endpoints, endpoint configs and variants allow runs of hyphens; models and components do not start or
# end with one. Both are at most 63 characters.
ENDPOINT_NAME: Final = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
MODEL_NAME: Final = r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$"
NAME_MAX: Final = 63
NAME_HINT: Final = "Use letters, digits and hyphens (at most 63), starting and ending with a letter or digit."

DEFAULT_REGION: Final = "us-east-1"
ACCOUNT: Final = "000000000000"  # pier has no accounts; a fixed one keeps ARNs well formed

# "AWS4-HMAC-SHA256 Credential=AKID/20240101/eu-west-1/sagemaker/aws4_request, ..."
_SCOPE = re.compile(r"Credential=[^/,\s]+/\d{8}/([a-z0-9-]+)/")

# The resource word in an ARN, per kind as the API names it in messages.
ARN_RESOURCE: Final = {
    "model": "model",
    "endpoint configuration": "endpoint-config",
    "endpoint": "endpoint",
    "inference component": "inference-component",
}


def arn(kind: str, name: str, region: str) -> str:
    """SageMaker lowercases the name in its ARNs (names are unique regardless of case)."""
    return f"arn:aws:sagemaker:{region}:{ACCOUNT}:{ARN_RESOURCE[kind]}/{name.lower()}"


def region_of(authorization: str | None) -> str:
    """The region the client signed for, so ARNs carry the region the user configured."""
    match = _SCOPE.search(authorization or "")
    return match.group(1) if match else DEFAULT_REGION
