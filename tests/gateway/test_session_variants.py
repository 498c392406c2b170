"""A stateful session on a classic endpoint belongs to its variant: calls that name no TargetVariant go to it, not
to wherever the variants' weights would send them, and it outlives an UpdateEndpoint that replaces its fleet (boto3
through a whole gateway whose copies all answer at one server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi import FastAPI, Request
from starlette.responses import Response

from pier.gateway.app import create_gateway
from tests.control.fakes import ServingBackend
from tests.gateway.served import Served, sagemaker_client, wait_for
from tests.runtime.test_sessions import client
from tests.sockets import serving

BODY = b'{"inputs": "hi"}'


def copy_app() -> FastAPI:
    app = FastAPI()

    @app.post("/invocations", response_model=None)
    async def invocations(request: Request) -> Response:
        await request.body()
        return Response(b"{}", media_type="application/json")

    return app


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    with serving(copy_app()) as copy_url:
        backend = ServingBackend(copy_url)
        with serving(create_gateway(tmp_path / "state", backend=backend, tick_s=0.05), lifespan="on") as url:
            sagemaker = sagemaker_client(url)
            sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
            for config in ("first", "second"):
                sagemaker.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[
                    {"VariantName": name, "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}
                    for name in ("blue", "green")])
            sagemaker.create_endpoint(EndpointName="llm", EndpointConfigName="first")
            in_service(sagemaker)
            yield Served(url, backend, tmp_path / "state")


def in_service(sagemaker: Any) -> None:
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName="llm")["EndpointStatus"] == "InService", timeout=20)


def invoke(url: str, **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = client(url).invoke_endpoint(EndpointName="llm", Body=BODY,
                                                         ContentType="application/json", **extra)
    return answer


def test_a_sessions_calls_stay_on_its_variant(served: Served) -> None:
    opened = invoke(served.url, SessionId="NEW_SESSION")
    session, home = opened["NewSessionId"].split(";")[0], opened["InvokedProductionVariant"]
    # 1 in 2**16 that the weights alone would send all of these to one variant
    assert {invoke(served.url)["InvokedProductionVariant"] for _ in range(16)} == {"blue", "green"}
    assert [invoke(served.url, SessionId=session)["InvokedProductionVariant"] for _ in range(16)] == [home] * 16
    stream = client(served.url).invoke_endpoint_with_response_stream(
        EndpointName="llm", Body=BODY, ContentType="application/json", SessionId=session)
    assert stream["InvokedProductionVariant"] == home
    other = "green" if home == "blue" else "blue"
    with pytest.raises(ClientError) as raised:  # naming the other variant is still a mistake
        invoke(served.url, SessionId=session, TargetVariant=other)
    assert raised.value.response["Error"]["Code"] == "ValidationError"
    assert f"opened on variant {home}, not variant {other}" in raised.value.response["Error"]["Message"]


def test_a_session_outlives_an_update_of_its_endpoint(served: Served) -> None:
    opened = invoke(served.url, SessionId="NEW_SESSION")
    session, home = opened["NewSessionId"].split(";")[0], opened["InvokedProductionVariant"]
    sagemaker = sagemaker_client(served.url)
    sagemaker.update_endpoint(EndpointName="llm", EndpointConfigName="second")
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName="llm")["EndpointConfigName"] == "second", timeout=20)
    in_service(sagemaker)
    assert json.loads(invoke(served.url, SessionId=session)["Body"].read()) == {}
    assert invoke(served.url, SessionId=session)["InvokedProductionVariant"] == home
