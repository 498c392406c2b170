"""Hostile input, and never a 5xx: hand-made bodies against every control-plane operation, schemathesis against
the control plane (through an OpenAPI made from botocore's model) and against the gateway's own routes. Every
refusal is AWS's error shape: `{"__type", "message"}` with an `x-amzn-RequestId`, and a message of bounded size."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode

from pier.control.api import OPERATIONS
from pier.control.request_limits import MAX_BODY_BYTES
from pier.gateway.app import create_gateway
from tests.control.fakes import FakeBackend
from tests.gateway.control_schema import PREFIX, ControlPaths, control_openapi
from tests.sockets import serving

TARGET = "X-Amz-Target"
MAX_MESSAGE = 4096  # an answer never echoes a huge input back whole


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway with a model, a classic endpoint and an endpoint for components, so operations reach their
    resources; the control plane also answers at /control/<Operation> for schemathesis."""
    folder = tmp_path_factory.mktemp("hostile")
    model = folder / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    app = create_gateway(folder / "state", backend=FakeBackend(), tick_s=0.05)
    with serving(ControlPaths(app), lifespan="on") as url:
        for operation, body in [
            ("CreateModel", {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": str(model)}}),
            ("CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": [
                {"VariantName": "v", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}]}),
            ("CreateEndpoint", {"EndpointName": "e", "EndpointConfigName": "c"}),
            ("CreateEndpointConfig", {"EndpointConfigName": "h", "ProductionVariants": [
                {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 1}]}),
            ("CreateEndpoint", {"EndpointName": "h", "EndpointConfigName": "h"}),
        ]:
            assert post(url, operation, json.dumps(body).encode()).status_code == 200
        yield url


def post(url: str, operation: str | None, raw: bytes, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "application/x-amz-json-1.1", **headers}
    if operation is not None:
        sent[TARGET] = f"SageMaker.{operation}"
    return httpx.post(url, content=raw, headers=sent, timeout=30)


def assert_aws_refusal(response: httpx.Response) -> dict[str, Any]:
    return assert_aws_answer(response.status_code, response.headers.get("x-amzn-RequestId"), response.content)


def assert_aws_answer(status: int, request_id: str | None, content: bytes) -> dict[str, Any]:
    assert status < 500, content[:1000]
    assert request_id
    body: dict[str, Any] = json.loads(content)
    if status != 200:
        assert set(body) == {"__type", "message"}, body
        assert body["__type"] in ("ValidationException", "SerializationException", "UnknownOperationException",
                                  "ResourceLimitExceeded", "ResourceInUse"), body
        assert len(body["message"]) <= MAX_MESSAGE, len(body["message"])
    return body


def nested(depth: int) -> bytes:
    return b'{"ModelName": "m", "Tags": ' + b"[" * depth + b"]" * depth + b"}"


HOSTILE: list[tuple[str, bytes]] = [
    ("deep nesting", nested(50_000)),
    ("nesting past the limit", nested(40)),
    ("a huge name", json.dumps({"ModelName": "m" * 500_000}).encode()),
    ("a body over the limit", b'{"ModelName": "' + b"m" * MAX_BODY_BYTES + b'"}'),
    ("a huge environment value", json.dumps({"ModelName": "m", "PrimaryContainer": {
        "ModelDataUrl": "/m", "Environment": {"A": "v" * 200_000}}}).encode()),
    ("101 environment entries", json.dumps({"ModelName": "m", "PrimaryContainer": {
        "ModelDataUrl": "/m", "Environment": {f"K{i}": "v" for i in range(101)}}}).encode()),
    ("10,000 environment entries", json.dumps({"ModelName": "m", "PrimaryContainer": {
        "ModelDataUrl": "/m", "Environment": {f"K{i}": "v" for i in range(10_000)}}}).encode()),
    ("environment keys no process takes", json.dumps({"ModelName": "m", "PrimaryContainer": {
        "ModelDataUrl": "/m", "Environment": {"A=B": "v", "": "v", "\u00e9": "v"}}}).encode()),
    ("a NUL in an environment value", json.dumps({"ModelName": "m", "PrimaryContainer": {
        "ModelDataUrl": "/m", "Environment": {"A": "a\x00b"}}}).encode()),
    ("wrong types everywhere", json.dumps({"ModelName": 7, "PrimaryContainer": "x", "Tags": {"a": 1}}).encode()),
    ("a list for an object", json.dumps({"ModelName": "m", "PrimaryContainer": [1, 2, 3]}).encode()),
    ("an object for a string", json.dumps({"ModelName": {"$ne": None}}).encode()),
    ("booleans for numbers", json.dumps({"InferenceComponentName": "c", "DesiredRuntimeConfig": {
        "CopyCount": True}}).encode()),
    ("numbers past any integer", b'{"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": '
                                 b"99999999999999999999999999999}}"),
    ("5,000 digits", b'{"MaxResults": ' + b"9" * 5000 + b"}"),
    ("NaN", b'{"MaxResults": NaN}'),
    ("infinity", b'{"CreationTimeAfter": 1e999}'),
    ("lone surrogates", b'{"ModelName": "\\ud800", "\\udfff": "x"}'),
    ("unicode names", json.dumps({"ModelName": "\u043c\u043e\u0434\u0435\u043b\u044c-\U0001f600"}).encode()),
    ("right-to-left and zero-width", json.dumps({"EndpointName": "e\u202e\u200bx"}).encode()),
    ("a NUL in a name", json.dumps({"EndpointName": "e\x00"}).encode()),
    ("invalid UTF-8", b'{"ModelName": "\xff\xfe\xfd"}'),
    ("not JSON", b"<xml>hello</xml>"),
    ("a JSON array", b"[]"),
    ("a JSON string", b'"CreateModel"'),
    ("null", b"null"),
    ("empty", b""),
    ("whitespace", b" \n\t "),
    ("a null member", b'{"ModelName": null, "PrimaryContainer": null}'),
    ("a huge list of variants", json.dumps({"EndpointConfigName": "c2", "ProductionVariants": [
        {"VariantName": f"v{i}", "InstanceType": "local", "InitialInstanceCount": 1} for i in range(5000)]}).encode()),
    ("variants of junk", json.dumps({"EndpointConfigName": "c2", "ProductionVariants": [
        None, 1, "x", [], {}]}).encode()),
    ("negative and fractional counts", json.dumps({"EndpointName": "e", "DesiredWeightsAndCapacities": [
        {"VariantName": "v", "DesiredInstanceCount": -5, "DesiredWeight": -0.5}]}).encode()),
    ("a float count", json.dumps({"InferenceComponentName": "c", "DesiredRuntimeConfig": {"CopyCount": 1.5}}).encode()),
    ("a NextToken of junk", json.dumps({"NextToken": "\u0000" * 100, "MaxResults": 5}).encode()),
    ("a huge NextToken", json.dumps({"NextToken": "9" * 8000}).encode()),
    ("timestamps as text", json.dumps({"CreationTimeAfter": "yesterday"}).encode()),
    ("a component spec of junk", json.dumps({"InferenceComponentName": "c", "EndpointName": "h", "Specification": {
        "ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 10**12,
                                                          "NumberOfCpuCoresRequired": 1e308}},
        "RuntimeConfig": {"CopyCount": 2**31 - 1}}).encode()),
    ("a model folder that is /proc", json.dumps({"ModelName": "p", "PrimaryContainer": {
        "ModelDataUrl": "/proc"}}).encode()),
    ("an archive URL of junk", json.dumps({"ModelName": "x", "PrimaryContainer": {
        "ModelDataUrl": "gopher://\x01\x02"}}).encode()),
]


@pytest.mark.parametrize(("what", "raw"), HOSTILE, ids=[what for what, _ in HOSTILE])
def test_hand_made_hostile_bodies_get_aws_errors_never_a_5xx(gateway: str, what: str, raw: bytes) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as client:
        for operation in OPERATIONS:
            response = client.post("/", content=raw, headers={
                TARGET: f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"})
            assert_aws_refusal(response)


@pytest.mark.parametrize(("target", "headers"), [
    (None, {}),
    ("SageMaker.", {}),
    ("SageMaker.CreateTrainingJob", {}),
    ("AnyScaleFrontendService.RegisterScalableTarget", {}),
    ("SageMaker.ListModels\r\nX-Injected: 1", {}),
    ("SageMaker.ListModels", {"Content-Type": "text/plain"}),
    ("SageMaker.ListModels", {"Content-Encoding": "gzip"}),
])
def test_hostile_headers(gateway: str, target: str | None, headers: dict[str, str]) -> None:
    sent = {TARGET: target} if target else {}
    try:
        response = httpx.post(gateway, content=b"{}", headers={**sent, **headers}, timeout=30)
    except (httpx.RemoteProtocolError, httpx.LocalProtocolError):
        return  # the client or the server refused the request line itself: no answer is no 5xx
    assert_aws_refusal(response)


def test_a_declared_length_over_the_limit_is_refused_without_waiting_for_the_body(gateway: str) -> None:
    host, port = gateway.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Amz-Target: SageMaker.ListModels\r\n"
                     b"Content-Length: " + str(50 * MAX_BODY_BYTES).encode() + b"\r\n\r\n{}")
        answer = b""  # answered though 50 MiB were promised and 2 bytes sent
        while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
    text = answer.decode("latin-1")
    assert text.startswith("HTTP/1.1 400") and "x-amzn-requestid" in text.lower()
    assert f"at most {MAX_BODY_BYTES} bytes" in text


def test_a_body_over_the_limit_is_refused_as_it_streams_in(gateway: str) -> None:
    def endless() -> Iterator[bytes]:
        yield b'{"ModelName": "'
        for _ in range(64):
            yield b"m" * 65536

    response = httpx.post(gateway, content=endless(), timeout=30,
                          headers={TARGET: "SageMaker.CreateModel", "Content-Type": "application/x-amz-json-1.1"})
    body = assert_aws_refusal(response)
    assert body["__type"] == "ValidationException" and f"at most {MAX_BODY_BYTES} bytes" in body["message"]


def test_the_gateway_still_serves_after_all_that(gateway: str) -> None:
    # (some hostile bodies are valid for some operations: DeleteEndpoint with {"EndpointName": "e", ...} deletes e)
    assert post(gateway, "ListEndpoints", b"{}").status_code == 200
    assert post(gateway, "CreateModel", b'{"ModelName": "after", "PrimaryContainer": {"ModelDataUrl": "/tmp"}}'
                ).status_code == 200
    assert httpx.get(gateway + "/ping").status_code == 200


# ---- schemathesis


def _configured(schema: Any, *, coverage: bool = True) -> Any:
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=8)
    if not coverage:
        schema.config.phases.update(phases=["examples", "fuzzing"])
    return schema


@pytest.fixture(scope="module")
def control_schema(gateway: str) -> Any:
    config = SchemathesisConfig()
    schema = schemathesis.openapi.from_dict(control_openapi(OPERATIONS), config=config)
    schema.config.update(base_url=gateway)
    return _configured(schema, coverage=False)


@pytest.fixture(scope="module")
def gateway_schema(gateway: str) -> Any:
    return _configured(schemathesis.openapi.from_url(gateway + "/openapi.json"))


control = schemathesis.pytest.from_fixture("control_schema")
routes = schemathesis.pytest.from_fixture("gateway_schema")


@control.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_schemathesis_on_the_control_plane(case: schemathesis.Case) -> None:
    response = case.call(timeout=30)
    assert response.status_code < 500, (case.path, case.body, response.text[:500])
    if case.method.upper() == "POST":  # (negative cases try other methods too: 405, from the web framework)
        request_id = {k.lower(): v for k, v in response.headers.items()}.get("x-amzn-requestid", [None])[0]
        assert_aws_answer(response.status_code, request_id, response.content)


@routes.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_schemathesis_on_the_gateways_routes(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error], timeout=30)


def test_the_control_schema_covers_every_operation() -> None:
    assert sorted(p.removeprefix(PREFIX) for p in control_openapi(OPERATIONS)["paths"]) == sorted(OPERATIONS)


