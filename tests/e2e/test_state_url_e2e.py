"""Two `pier up` processes on one PostgreSQL (`--state-url`) with the local backend and a TINY GGUF: an endpoint
created through the follower is brought InService by the leader and answers through both gateways (the follower
routes to the leader's copies, as the leader publishes them); kill -9 of the leader: the follower leads within
10 s, creates a new endpoint that goes InService and answers through it; the killed gateway, started again,
follows, sees both endpoints and answers for the new leader's. And a follower shows the leader's copies as the
leader does: `/pier/copies`, a copy's log (the leader's file, on this host), the console's summary, `pier ls`,
`describe` and `logs`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.server.processes import pier_environment
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


def listed(gateway: GatewayProcess) -> list[dict[str, Any]]:
    return httpx.get(gateway.url + "/pier/copies", timeout=10).json()["copies"]  # type: ignore[no-any-return]


def pier(gateway: GatewayProcess, home: Path, *args: str) -> str:
    """The pier CLI's output through `gateway` (PIER_URL), unsigned as the gateways here ask for no key."""
    done = subprocess.run([sys.executable, "-m", "pier", *args], capture_output=True, text=True, timeout=120,
                          env=pier_environment(PIER_URL=gateway.url, HOME=str(home), COLUMNS="200"))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_follower_shows_the_leaders_copies_as_the_leader_does(tmp_path: Path, tiny_gguf: Path,
                                                                postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a.log", options=("--state-url", url)) as first:
        first.wait_ready()
        until(lambda: role(first)["role"] == "leader", timeout=20, what="the first gateway leading")
        with GatewayProcess(tmp_path / "b", free_port(), tmp_path / "b.log",
                            options=("--state-url", url)) as second:
            second.wait_ready()
            until(lambda: role(second)["leader"] == role(first)["gateway"], timeout=20, what="a follower")
            endpoint(sagemaker_client(second.url), "shown", tiny_gguf)
            until(lambda: in_service(sagemaker_client(first.url), "shown"), timeout=120, what="shown InService")
            assert until(lambda: answers(second.url, "shown"), timeout=10, what="shown answering through the follower")

            def same(row: dict[str, Any]) -> tuple[Any, ...]:
                return row["copy_id"], row["pid"], row["state"], row["restarts"], row["instance"], row["owner"]

            copies = until(lambda: (rows := listed(first)) and [same(r) for r in rows] == [
                same(r) for r in listed(second)] and rows, timeout=10, what="the follower listing the leader's copies")
            [copy] = copies
            assert copy["state"] == "Ready" and copy["pid"] and copy["owner"] == role(first)["gateway"]
            assert listed(second) == listed(first)  # the whole row: kernels, cores, device too

            leaders_log = httpx.get(f"{first.url}/pier/copies/{copy['copy_id']}/logs", timeout=10)
            followers_log = httpx.get(f"{second.url}/pier/copies/{copy['copy_id']}/logs", timeout=10)
            assert leaders_log.status_code == followers_log.status_code == 200
            assert f"copy {copy['copy_id']}" in followers_log.text  # the copy's lines: pier's own notes in its log
            assert followers_log.text.splitlines()[:5] == leaders_log.text.splitlines()[:5]

            summary = httpx.get(second.url + "/pier/metrics/summary", timeout=10).json()["workloads"]
            shown = summary["shown/AllTraffic"]
            assert (shown["copies"], shown["endpoint"]) == ({"Ready": 1}, "shown")
            assert shown["generations"] >= 1  # scraped from the leader's copy: the requests above
            assert 'pier_copies{component="shown/AllTraffic",state="Ready"} 1.0' in httpx.get(
                second.url + "/metrics", timeout=10).text

            home = tmp_path / "home"
            assert json.loads(pier(second, home, "ls", "--json")) == json.loads(pier(first, home, "ls", "--json"))
            assert json.loads(pier(second, home, "describe", "shown", "--json"))["copies"] == json.loads(
                pier(first, home, "describe", "shown", "--json"))["copies"]
            assert until(lambda: (text := pier(second, home, "logs", "shown", "--lines", "3")) == pier(
                first, home, "logs", "shown", "--lines", "3") and text, timeout=20, what="the same logs")


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
