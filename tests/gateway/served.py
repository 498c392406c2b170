"""A gateway over a fake backend, served by uvicorn on a loopback port, and clients for it: fixtures that the
control-plane, gateway and client tests share (their conftest files import them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from pier.gateway.app import create_gateway
from tests.control.botocore_shapes import output_problems
from tests.control.fakes import FakeBackend
from tests.sockets import serving
from tests.waiting import until


@dataclass
class Served:
    url: str
    backend: FakeBackend
    state_dir: Path

    def call(self, operation: str, body: dict[str, Any] | None = None, *, expect: int = 200) -> dict[str, Any]:
        """One control-plane call as raw JSON 1.1, its answer checked against botocore's output shape."""
        response = httpx.post(self.url, json=body or {}, headers={
            "X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"})
        assert response.status_code == expect, response.text
        assert response.headers["x-amzn-RequestId"]
        reply = response.json()
        if expect == 200:
            assert output_problems(operation, reply) == []
        return reply


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    backend = FakeBackend()
    app = create_gateway(tmp_path / "state", backend=backend, tick_s=0.05)
    with serving(app, lifespan="on") as url:
        yield Served(url, backend, tmp_path / "state")


@pytest.fixture
def sagemaker(served: Served) -> Any:
    return sagemaker_client(served.url)


def sagemaker_client(url: str) -> Any:
    return boto3.client(
        "sagemaker", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="pier",
        aws_secret_access_key="pier", config=Config(retries={"max_attempts": 1}),
    )


def wait_for(condition: Any, timeout: float = 5.0) -> Any:
    return until(condition, timeout, interval=0.02)


def classic_endpoint(url: str, model: Path, name: str, instances: int = 1) -> Any:
    """Model `m` from `model`, config `c` of `instances` local instances, and endpoint `name` on it, InService; the
    sagemaker client that made them."""
    sagemaker = sagemaker_client(url)
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": instances}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName="c")
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")
    return sagemaker
