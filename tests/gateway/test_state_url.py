"""Two gateways on one PostgreSQL (`--state-url`): both serve the control plane, a write through one is read at once
through the other (create-then-describe), exactly one leads the loops and `/pier` says which, the endpoint
created through the follower goes InService by the leader's reconciler, and a gateway outlives its database's
restart. The backend is a fake (copies answer
nothing); the e2e tests run real copies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import serving
from tests.waiting import until


@contextmanager
def gateways(tmp_path: Path, url: str, count: int) -> Iterator[list[str]]:
    with ExitStack() as stack:
        urls = []
        for i in range(count):
            app = create_gateway(tmp_path / f"state-{i}", backend=FakeBackend(), tick_s=0.05,
                                 settings=GatewaySettings(state_url=url))
            urls.append(stack.enter_context(serving(app, lifespan="on")))
        yield urls


def runtime_client(url: str) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="eu-west-1", aws_access_key_id="pier",
                        aws_secret_access_key="pier", config=Config(retries={"max_attempts": 1}))


def about(url: str) -> dict[str, object]:
    return httpx.get(url + "/pier").json()  # type: ignore[no-any-return]


def test_two_gateways_share_one_state_and_one_leads(tmp_path: Path, postgres_server: PostgresServer) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    with gateways(tmp_path, postgres_server.database(), 2) as (one, two):
        # a follower knows it follows a moment before it has read who leads
        until(lambda: {(about(u)["role"], about(u)["leader"] is not None) for u in (one, two)}
              == {("leader", True), ("follower", True)}, timeout=20, what="a leader and a follower who names it")
        leader, follower = (one, two) if about(one)["role"] == "leader" else (two, one)
        assert about(follower)["leader"] == about(leader)["gateway"] == about(leader)["leader"]
        assert about(leader)["state"] == "postgresql"
        through_follower, through_leader = sagemaker_client(follower), sagemaker_client(leader)
        through_follower.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        assert through_leader.describe_model(ModelName="M")["ModelName"] == "m"  # at once, through the other
        through_follower.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])
        through_follower.create_endpoint(EndpointName="e", EndpointConfigName="c")
        assert through_leader.describe_endpoint(EndpointName="e")["EndpointStatus"] == "Creating"
        until(lambda: through_follower.describe_endpoint(EndpointName="e")["EndpointStatus"] == "InService",
              timeout=20, what="the endpoint in service, by the leader's reconciler")
        assert [e["EndpointName"] for e in through_leader.list_endpoints()["Endpoints"]] == ["e"]


def test_without_a_state_url_the_gateway_leads_on_its_folder(tmp_path: Path) -> None:
    app = create_gateway(tmp_path / "state", backend=FakeBackend(), tick_s=0.05)
    with serving(app, lifespan="on") as url:
        info = about(url)
        assert (info["role"], info["state"], info["leader"]) == ("leader", "folder", info["gateway"])


def test_a_gateway_outlives_its_database_restart(tmp_path: Path, postgres_server: PostgresServer) -> None:
    """While the database is down every call that reads it gets 503 in its API's shape (the control plane's
    ServiceUnavailable, the runtime's), the gateway goes on answering what needs no database, and the first call
    once the database is back works, with no restart; a dropped connection is as if nothing happened."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    url = postgres_server.database()
    with gateways(tmp_path, url, 1) as (gateway,):
        sagemaker, runtime = sagemaker_client(gateway), runtime_client(gateway)
        sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        postgres_server.halt()
        try:
            calls = {
                "DescribeModel": lambda: sagemaker.describe_model(ModelName="m"),
                "ListEndpoints": sagemaker.list_endpoints,
                "CreateModel": lambda: sagemaker.create_model(ModelName="m2",
                                                              PrimaryContainer={"ModelDataUrl": str(model)}),
                "InvokeEndpoint": lambda: runtime.invoke_endpoint(EndpointName="e", Body=b"{}",
                                                                  ContentType="application/json"),
            }
            for name, call in calls.items():
                with pytest.raises(ClientError) as refused:
                    call()
                error, status = refused.value.response["Error"], refused.value.response["ResponseMetadata"]
                assert (error["Code"], status["HTTPStatusCode"]) == ("ServiceUnavailable", 503), name
                assert "state database" in error["Message"] and "Retry shortly" in error["Message"], name
            assert httpx.get(gateway + "/ping").status_code == 200  # the gateway itself is up
        finally:
            postgres_server.start()
        assert sagemaker.describe_model(ModelName="m")["ModelName"] == "m"  # the first call after: no restart
        sagemaker.create_model(ModelName="m2", PrimaryContainer={"ModelDataUrl": str(model)})  # none of it was made
        assert postgres_server.terminate(url) > 0
        assert sorted(m["ModelName"] for m in sagemaker.list_models()["Models"]) == ["m", "m2"]
