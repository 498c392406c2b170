"""Two `pier up --backend ray` processes on one PostgreSQL (`--state-url`) and one Ray cluster on this machine, with a
TINY GGUF: an endpoint created through the follower is brought InService by the leader (its copy an actor on the
cluster) and answers through both; the follower owns no copy. kill -9 of the leader: the follower leads within
10 s, takes over the copy as it is (the same actor, the same model-server process, not restarted, not doubled),
creates a new endpoint that goes InService, and both answer through it; the killed gateway, started again, follows,
sees both endpoints and answers both."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backends.ray_cluster import copy_actors, instance_groups, ray_cluster
from tests.e2e.gateway_process import GatewayProcess
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with ray_cluster(workers=0, cpus=3) as started:  # one node: every gateway and copy shares the host's 2 cores
        yield started


def role(gateway: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gateway.url + "/pier", timeout=5).json()  # type: ignore[no-any-return]


def copies(gateway: GatewayProcess) -> dict[str, dict[str, Any]]:
    return {c["copy_id"]: c for c in httpx.get(gateway.url + "/pier/copies", timeout=10).json()["copies"]}


def actor_pid(copy_id: str) -> int:
    """The process of the copy's Ray actor (the model server's parent)."""
    import ray

    pid: int = ray.get(ray.get_actor(f"pier-copy-{copy_id}").identity.remote(), timeout=30).pid
    return pid


def endpoint(sagemaker: Any, name: str, model: Path) -> None:
    sagemaker.create_model(ModelName=name, PrimaryContainer={"ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c7g.xlarge",
        "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


def in_service(sagemaker: Any, name: str) -> bool:
    return bool(sagemaker.describe_endpoint(EndpointName=name)["EndpointStatus"] == "InService")


def answers(gateway: GatewayProcess, name: str) -> bool:
    reply = httpx.post(f"{gateway.url}/endpoints/{name}/invocations", timeout=60,
                       headers={"Content-Type": "application/json"},
                       content=json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 2}}))
    return reply.status_code == 200


def test_a_new_leader_adopts_the_copies_on_the_shared_cluster_as_they_are(
        cluster: Any, tmp_path: Path, tiny_gguf: Path, postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    config = tmp_path / "ray.yaml"
    config.write_text(f"memory: false\nnode_dir: {tmp_path / 'nodes'}\ncapacity_wait_s: 30\n")
    options = ("--state-url", url, "--backend", "ray", "--ray-address", cluster.address, "--ray-config", str(config),
               "--ray-cpus-per-vcpu", "0.25")

    def gateway(name: str, log: str) -> GatewayProcess:
        return GatewayProcess(tmp_path / name, free_port(), tmp_path / log, options=options)

    with gateway("a", "a.log") as first:
        first.wait_ready(120)
        until(lambda: role(first)["role"] == "leader", timeout=20, what="the first gateway leading")
        with gateway("b", "b.log") as second:
            second.wait_ready(120)
            until(lambda: role(second)["leader"] == role(first)["gateway"], timeout=20, what="a follower")
            assert role(second)["role"] == "follower"
            through_follower = sagemaker_client(second.url)
            endpoint(through_follower, "first", tiny_gguf)
            until(lambda: in_service(through_follower, "first"), timeout=240, what="first InService")
            assert answers(first, "first")
            assert until(lambda: answers(second, "first"), timeout=10, what="first answering through the follower")
            before = copies(first)
            [copy_id] = before
            assert before[copy_id]["state"] == "Ready" and before[copy_id]["pid"]
            # a follower owns no copy: it routes by the leader's published list, and lists the leader's copies
            until(lambda: copies(second) == copies(first), timeout=10, what="the follower listing the leader's copies")
            log = httpx.get(f"{second.url}/pier/copies/{copy_id}/logs", params={"lines": 100_000}, timeout=30)
            assert log.status_code == 200 and "actor on node" in log.text  # from the copy's actor, on its node
            actor = actor_pid(copy_id)

            first.process.kill()  # kill -9 of the leader
            killed = time.monotonic()
            until(lambda: role(second)["role"] == "leader", timeout=15, interval=0.1, what="the follower leading")
            takeover_s = time.monotonic() - killed
            assert takeover_s < 10, takeover_s
            until(lambda: copies(second).get(copy_id, {}).get("state") == "Ready", timeout=60,
                  what="the copy taken over and ready")
            after = copies(second)[copy_id]
            assert (after["pid"], after["url"], after["restarts"]) == (before[copy_id]["pid"],
                                                                       before[copy_id]["url"], 0)
            assert actor_pid(copy_id) == actor  # the same actor: not restarted
            assert answers(second, "first")

            endpoint(through_follower, "second", tiny_gguf)
            until(lambda: in_service(through_follower, "second"), timeout=240, what="second InService")
            assert answers(second, "second")
            assert len(copy_actors()) == 2 and len(instance_groups()) == 2  # one copy per endpoint: none doubled
            now = copies(second)
            assert (now[copy_id]["pid"], now[copy_id]["restarts"]) == (before[copy_id]["pid"], 0)
            assert actor_pid(copy_id) == actor
            with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a2.log",
                                options=options) as restarted:  # the killed one, started again
                restarted.wait_ready(120)
                until(lambda: role(restarted)["leader"] == role(second)["gateway"], timeout=20, what="a follower")
                assert role(restarted)["role"] == "follower"
                until(lambda: copies(restarted) == copies(second), timeout=10, what="the leader's copies listed")
                assert {e["EndpointName"] for e in sagemaker_client(restarted.url).list_endpoints()["Endpoints"]} == {
                    "first", "second"}
                for name in ("first", "second"):
                    assert until(lambda name=name: answers(restarted, name), timeout=10,
                                 what=f"{name} answering through the restarted follower")
                assert len(copy_actors()) == 2 and actor_pid(copy_id) == actor  # it joined and touched nothing
    print(f"takeover after kill -9: {takeover_s:.1f} s; copy {copy_id} kept: actor pid {actor}, model server pid "
          f"{before[copy_id]['pid']}")
