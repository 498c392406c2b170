"""Deeply nested JSON at the gateway is the client's error in each route's shape: the control plane's AWS JSON 1.1
(SerializationException), the OpenAI routes' error object. Never a 500."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pier.gateway.app import create_gateway
from tests.control.fakes import FakeBackend
from tests.gateway.served import Served
from tests.sockets import serving

DEEP_ARRAY = b"[" * 100_000
DEEP_FIELD = b'{"EndpointName": "x", "model": "x", "Tags": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    backend = FakeBackend()
    with serving(create_gateway(tmp_path / "state", backend=backend, tick_s=0.05), lifespan="on") as url:
        yield Served(url, backend, tmp_path / "state")


@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_FIELD], ids=["array", "field"])
def test_the_control_plane_answers_a_serialization_error(served: Served, body: bytes) -> None:
    response = httpx.post(served.url, content=body, headers={
        "X-Amz-Target": "SageMaker.DescribeEndpoint", "Content-Type": "application/x-amz-json-1.1"})
    assert response.status_code == 400, response.text
    assert response.json()["__type"] == "SerializationException" and "too deeply" in response.json()["message"]
    assert response.headers["x-amzn-RequestId"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/endpoints/x/v1/chat/completions"])
@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_FIELD], ids=["array", "field"])
def test_the_openai_routes_answer_openais_400(served: Served, path: str, body: bytes) -> None:
    response = httpx.post(served.url + path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_the_runtime_reads_no_body_it_cannot_parse(served: Served) -> None:
    response = httpx.post(served.url + "/endpoints/x/invocations", content=DEEP_ARRAY,
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.headers["x-amzn-ErrorType"].startswith("ValidationError")


def test_a_chunked_control_plane_body_over_the_limit_is_a_validation_exception(served: Served) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is found while reading
        for _ in range(8):
            yield b" " * (1 << 20)

    for target in ("SageMaker.ListEndpoints", "GraniteServiceVersion20100801.PutMetricData"):
        response = httpx.post(served.url, content=chunks(), headers={
            "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1"})
        assert response.status_code in (400, 413), response.text
        assert response.json()["__type"] == "ValidationException" and "bytes" in response.json()["message"]
