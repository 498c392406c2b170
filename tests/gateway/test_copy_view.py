"""The copies a gateway sees (`pier.gateway.copy_view`): two gateways on one PostgreSQL, each with a fake backend;
the follower owns none, yet lists the leader's copies as the leader does (`/pier/copies`), counts them in `/metrics`
and the console's summary, and answers a log it cannot read with pier's 404 naming the leader."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import serving
from tests.waiting import until


def about(url: str) -> dict[str, Any]:
    return httpx.get(url + "/pier").json()  # type: ignore[no-any-return]


def listed(url: str) -> list[dict[str, Any]]:
    return httpx.get(url + "/pier/copies").json()["copies"]  # type: ignore[no-any-return]


@contextmanager
def leader_and_follower(tmp_path: Path, url: str) -> Iterator[tuple[str, str, FakeBackend]]:
    backends = [FakeBackend(), FakeBackend()]
    with ExitStack() as stack:
        urls = [stack.enter_context(serving(create_gateway(
            tmp_path / f"state-{i}", backend=backend, tick_s=0.05, settings=GatewaySettings(state_url=url)),
            lifespan="on")) for i, backend in enumerate(backends)]
        until(lambda: {about(u)["role"] for u in urls} == {"leader", "follower"} and all(
            about(u)["leader"] for u in urls), timeout=20, what="a leader and a follower who names it")
        first = 0 if about(urls[0])["role"] == "leader" else 1
        yield urls[first], urls[1 - first], backends[first]


def test_a_follower_lists_scrapes_and_names_the_leaders_copies(tmp_path: Path,
                                                              postgres_server: PostgresServer) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    with leader_and_follower(tmp_path, postgres_server.database()) as (leader, follower, backend):
        sagemaker = sagemaker_client(follower)
        sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 2}])
        sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
        until(lambda: len(listed(leader)) == 2, timeout=20, what="the leader's two copies")
        rows = until(lambda: (rows := listed(leader)) == listed(follower) and rows, timeout=10,
                     what="the follower listing the leader's copies as the leader does")
        assert {(r["component"], r["state"], r["owner"]) for r in rows} == {
            ("e/AllTraffic", "Ready", about(leader)["gateway"])}
        assert {r["pid"] for r in rows} == {s.pid for s in backend.statuses()} and all(r["instance"] for r in rows)

        [copy_id, _] = sorted(r["copy_id"] for r in rows)
        assert httpx.get(f"{leader}/pier/copies/{copy_id}/logs").text == f"log of {copy_id}\n"
        reply = httpx.get(f"{follower}/pier/copies/{copy_id}/logs")
        assert reply.status_code == 404
        message = reply.json()["message"]
        assert f"copy {copy_id} is the leader's ({about(leader)['gateway']})" in message and "GET /pier" in message

        summary = httpx.get(follower + "/pier/metrics/summary").json()["workloads"]
        assert (summary["e/AllTraffic"]["copies"], summary["e/AllTraffic"]["endpoint"]) == ({"Ready": 2}, "e")
        metrics = httpx.get(follower + "/metrics").text
        assert 'pier_copies{component="e/AllTraffic",state="Ready"} 2.0' in metrics
