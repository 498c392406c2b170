"""The audit log: one line per control-plane call (principal, operation, resource, outcome) and per refusal."""

from __future__ import annotations

import json

import httpx
import pytest
from botocore.exceptions import ClientError

from pier.security.audit import audit, operation_of, resource_of
from tests.security.conftest import Secured


def test_every_control_plane_call_leaves_a_line(secured: Secured, audit_lines: list[str]) -> None:
    secured.deploy("audited")
    created = [line for line in audit_lines if "CreateModel" in line]
    assert created == ["audit principal=admin operation=sagemaker:CreateModel resource=audited outcome=200 "
                       "client=127.0.0.1"]
    assert any("operation=sagemaker:CreateEndpoint resource=audited outcome=200" in line for line in audit_lines)
    assert any("operation=sagemaker:DescribeEndpoint resource=audited" in line for line in audit_lines)
    with pytest.raises(ClientError):
        secured.client("sagemaker").describe_model(ModelName="missing")
    assert audit_lines[-1].startswith("audit principal=admin operation=sagemaker:DescribeModel resource=missing "
                                      "outcome=400")


def test_refusals_leave_a_line_naming_who_when_known(secured: Secured, audit_lines: list[str]) -> None:
    with pytest.raises(ClientError):
        secured.client("sagemaker", "invoker").create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": "/x"})
    assert audit_lines[-1] == ("audit principal=invoker operation=sagemaker:CreateModel resource=m "
                               "outcome=AccessDeniedException client=127.0.0.1")
    httpx.post(secured.url + "/endpoints/e/invocations", content=b"{}")
    assert audit_lines[-1] == ("audit principal=- operation=sagemaker:InvokeEndpoint resource=e "
                               "outcome=MissingAuthenticationTokenException client=127.0.0.1")


def test_runtime_calls_that_succeed_are_not_audited(secured: Secured, audit_lines: list[str]) -> None:
    secured.deploy("quiet")
    before = len(audit_lines)
    secured.client("sagemaker-runtime", "invoker").invoke_endpoint(
        EndpointName="quiet", ContentType="application/json", Body=json.dumps({"inputs": "x"}))
    assert len(audit_lines) == before


def test_a_line_cannot_be_forged(audit_lines: list[str]) -> None:
    audit("eve\naudit principal=admin", "op", "name with spaces", "200", "127.0.0.1")
    assert audit_lines == ["audit principal=eve?audit_principal?admin operation=op resource=name_with_spaces "
                           "outcome=200 client=127.0.0.1"]


@pytest.mark.parametrize(("body", "resource"), [
    (b'{"EndpointName": "e", "EndpointConfigName": "c"}', "e"),
    (b'{"InferenceComponentName": "ic", "EndpointName": "e"}', "ic"),
    (b'{"ModelName": "m"}', "m"), (b"{}", "-"), (b"[]", "-"), (b"nope", "-"), (None, "-"),
])
def test_resource_of(body: bytes | None, resource: str) -> None:
    assert resource_of(body) == resource


@pytest.mark.parametrize(
    ("method", "path", "target", "operation"),
    [
        ("POST", "/", "SageMaker.CreateModel", "sagemaker:CreateModel"),
        ("POST", "/", None, "sagemaker:UnknownOperation"),
        ("POST", "/endpoints/e/invocations", None, "sagemaker:InvokeEndpoint"),
        ("POST", "/endpoints/e/invocations-response-stream", None, "sagemaker:InvokeEndpointWithResponseStream"),
        ("POST", "/endpoints/e/async-invocations", None, "sagemaker:InvokeEndpointAsync"),
        ("GET", "/pier/copies", None, "GET /pier/copies"),
    ],
)
def test_operation_of(method: str, path: str, target: str | None, operation: str) -> None:
    assert operation_of(method, path, target) == operation
