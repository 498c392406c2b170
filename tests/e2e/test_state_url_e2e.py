"""Two `pier up` processes on one PostgreSQL (`--state-url`) with the local backend and a TINY GGUF: an endpoint
created through the follower is brought InService by the leader and answers through both gateways (the follower
routes to the leader's copies, as the leader publishes them); kill -9 of the leader: the follower leads within
10 s, creates a new endpoint that goes InService and answers through it; the killed gateway, started again,
follows, sees both endpoints and answers for the new leader's."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e


def role(gateway: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gateway.url + "/pier", timeout=5).json()  # type: ignore[no-any-return]


def endpoint(sagemaker: Any, name: str, model: Path) -> None:
    sagemaker.create_model(ModelName=name, PrimaryContainer={"ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


def in_service(sagemaker: Any, name: str) -> bool:
    return bool(sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")


def answers(url: str, name: str) -> bool:
    reply = httpx.post(f"{url}/endpoints/{name}/invocations", timeout=60, headers={"Content-Type": "application/json"},
                       content=json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 2}}))
    return reply.status_code == 200


def test_the_follower_takes_over_a_killed_leader(tmp_path: Path, tiny_gguf: Path,
                                                 postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a.log", options=("--state-url", url)) as first:
        first.wait_ready()
        until(lambda: role(first)["role"] == "leader", timeout=20, what="the first gateway leading")
        with GatewayProcess(tmp_path / "b", free_port(), tmp_path / "b.log",
                            options=("--state-url", url)) as second:
            second.wait_ready()
            until(lambda: role(second)["leader"] == role(first)["gateway"], timeout=20, what="a follower")
            assert role(second)["role"] == "follower"
            through_follower = sagemaker_client(second.url)
            endpoint(through_follower, "first", tiny_gguf)
            until(lambda: in_service(sagemaker_client(first.url), "first"), timeout=120, what="first InService")
            assert answers(first.url, "first")  # created through one, answered through the other
            # the follower routes to the leader's copies, as the leader publishes them (gateway/copy_board.py)
            assert until(lambda: answers(second.url, "first"), timeout=10, what="first answering through the follower")

            first.process.kill()  # kill -9 of the leader
            killed = time.monotonic()
            until(lambda: role(second)["role"] == "leader", timeout=15, interval=0.1, what="the follower leading")
            takeover_s = time.monotonic() - killed
            assert takeover_s < 10, takeover_s
            endpoint(through_follower, "second", tiny_gguf)
            until(lambda: in_service(through_follower, "second"), timeout=120, what="second InService")
            assert answers(second.url, "second")
            assert {e["EndpointName"] for e in through_follower.list_endpoints()["Endpoints"]} == {"first", "second"}
            with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a2.log",
                                options=("--state-url", url)) as restarted:  # the killed one, started again
                restarted.wait_ready()
                until(lambda: role(restarted)["leader"] == role(second)["gateway"], timeout=20, what="a follower")
                assert {e["EndpointName"] for e in sagemaker_client(restarted.url).list_endpoints()["Endpoints"]} == {
                    "first", "second"}
                assert until(lambda: answers(restarted.url, "second"), timeout=10,
                             what="second answering through the restarted follower")
    print(f"takeover after kill -9: {takeover_s:.1f} s")
