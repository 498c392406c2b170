"""The gateway's leadership owns the copies (gateway/app.py `_lead`): on a cluster several gateways share (as the ray
backend's), the leader's backend takes over the copies running there before its reconciler's first tick, and lets
go of them, stopping none, when its lease is lost; the next leader's reconciler counts them as its own and starts
none again, and a follower owns and touches none. Alone on its folder, the gateway owns them before it serves and
ends them with close() on its way out. The backend is a fake whose copies live on a shared `Cluster`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import serving
from tests.waiting import until


class Cluster:
    """Where copies run whoever owns them: they outlive the gateway that started them."""

    def __init__(self) -> None:
        self.copies: dict[str, CopyStatus] = {}
        self.started: list[str] = []  # every copy ever started, by any gateway


class ClusterBackend(FakeBackend):
    """A fake backend on a shared cluster: it owns (lists, stops) only what it started or took over."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__()
        self.cluster = cluster
        self.calls: list[str] = []  # take_over, let_go, close, in order
        self.taking = threading.Event()  # cleared: take_over() waits for it (a cluster slow to answer)
        self.taking.set()

    async def start(self, spec: CopySpec) -> None:
        await super().start(spec)
        self.cluster.copies[spec.copy_id] = self.copies[spec.copy_id]
        self.cluster.started.append(spec.copy_id)

    async def stop(self, copy_id: str) -> None:
        await super().stop(copy_id)
        self.cluster.copies.pop(copy_id, None)

    async def take_over(self) -> None:
        self.calls.append("take_over")
        await asyncio.to_thread(self.taking.wait)
        self.copies = dict(self.cluster.copies)

    async def let_go(self) -> None:
        self.calls.append("let_go")
        self.copies = {}

    async def close(self) -> None:
        self.calls.append("close")
        self.copies = {}  # left on the cluster, as the ray backend leaves them on a cluster not its own


def about(url: str) -> dict[str, Any]:
    return httpx.get(url + "/pier").json()  # type: ignore[no-any-return]


def cut_off_the_leader(url: str) -> None:
    """The leader's lease connection dies (a network cut): it stops leading, the other takes over."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pier' "
                      "AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')")


def endpoint(sagemaker: Any, name: str, model: Path) -> None:
    sagemaker.create_model(ModelName=name, PrimaryContainer={"ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


def described(sagemaker: Any, name: str) -> tuple[str, int]:
    found = sagemaker.describe_endpoint(EndpointName=name)
    return found["EndpointStatus"], found["ProductionVariants"][0].get("CurrentInstanceCount", 0)


@contextmanager
def gateways(tmp_path: Path, url: str, backends: list[ClusterBackend]) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(serving(create_gateway(
            tmp_path / f"state-{i}", backend=backend, tick_s=0.05, settings=GatewaySettings(state_url=url)),
            lifespan="on")) for i, backend in enumerate(backends)]


def test_the_copies_change_hands_with_the_lease_as_they_are(tmp_path: Path, postgres_server: PostgresServer) -> None:
    url, cluster = postgres_server.database(), Cluster()
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    backends = [ClusterBackend(cluster), ClusterBackend(cluster)]
    with gateways(tmp_path, url, backends) as urls:
        until(lambda: {(about(u)["role"], about(u)["leader"] is not None) for u in urls}
              == {("leader", True), ("follower", True)}, timeout=20, what="a leader and a follower who names it")
        first = 0 if about(urls[0])["role"] == "leader" else 1
        second = 1 - first
        endpoint(sagemaker_client(urls[second]), "e", model)
        until(lambda: described(sagemaker_client(urls[second]), "e") == ("InService", 1), timeout=20,
              what="e InService, its copy counted through the follower (the leader's, as published)")
        [copy_id] = cluster.started
        running = cluster.copies[copy_id]
        assert backends[second].calls == [] and backends[second].statuses() == []  # a follower owns nothing

        cut_off_the_leader(url)
        until(lambda: about(urls[second])["role"] == "leader", timeout=20, what="the follower leading")
        until(lambda: about(urls[first])["role"] == "follower", timeout=20, what="the old leader following")
        assert backends[first].calls == ["take_over", "let_go"] and backends[first].statuses() == []
        assert backends[second].calls == ["take_over"] and backends[second].statuses() == [running]
        assert cluster.copies == {copy_id: running}  # not stopped by the one that let go
        endpoint(sagemaker_client(urls[first]), "f", model)  # the new leader's reconciler has ticked since
        until(lambda: described(sagemaker_client(urls[first]), "f") == ("InService", 1), timeout=20, what="f")
        assert cluster.started == [copy_id, next(c for c in cluster.copies if c != copy_id)]  # e's: not again

        cut_off_the_leader(url)  # and back: the first gateway's reconciler runs a second time in its process
        until(lambda: about(urls[first])["role"] == "leader", timeout=20, what="the first gateway leading again")
        assert backends[first].calls == ["take_over", "let_go", "take_over"]
        assert {s.copy_id for s in backends[first].statuses()} == set(cluster.copies) and len(cluster.copies) == 2
        endpoint(sagemaker_client(urls[second]), "g", model)
        until(lambda: described(sagemaker_client(urls[second]), "g") == ("InService", 1), timeout=20, what="g")
        assert len(cluster.started) == 3 and len(cluster.copies) == 3  # one copy per endpoint, none doubled
        assert all(cluster.copies[c].state is CopyState.READY for c in cluster.started)
        assert described(sagemaker_client(urls[first]), "e") == ("InService", 1)


def test_a_new_leader_routes_by_the_published_copies_until_it_has_taken_them_over(
        tmp_path: Path, postgres_server: PostgresServer) -> None:
    url, cluster = postgres_server.database(), Cluster()
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    backends = [ClusterBackend(cluster), ClusterBackend(cluster)]
    with gateways(tmp_path, url, backends) as urls:
        until(lambda: {about(u)["role"] for u in urls} == {"leader", "follower"}, timeout=20, what="a leader")
        first = 0 if about(urls[0])["role"] == "leader" else 1
        second = 1 - first
        endpoint(sagemaker_client(urls[first]), "e", model)
        until(lambda: described(sagemaker_client(urls[second]), "e") == ("InService", 1), timeout=20,
              what="e InService, its copy published")
        backends[second].taking.clear()  # its take-over of the copies will hang until set
        try:
            cut_off_the_leader(url)
            until(lambda: about(urls[second])["role"] == "leader", timeout=20, what="the follower leading")
            until(lambda: backends[second].calls == ["take_over"], timeout=5, what="its take-over begun")
            # Leading, it owns no copy yet: it routes (and counts) by the copies the last leader published, which
            # are still serving, not by its own empty list.
            assert described(sagemaker_client(urls[second]), "e") == ("InService", 1)
        finally:
            backends[second].taking.set()
        until(lambda: backends[second].statuses() != [], timeout=10, what="the copies taken over")
        assert described(sagemaker_client(urls[second]), "e") == ("InService", 1)


def test_alone_on_its_folder_it_owns_the_copies_before_it_serves_and_closes_them_on_exit(tmp_path: Path) -> None:
    cluster = Cluster()
    cluster.copies["left-1"] = CopyStatus("left-1", "gone/AllTraffic", CopyState.READY, "http://127.0.0.1:9")
    backend = ClusterBackend(cluster)
    with serving(create_gateway(tmp_path / "state", backend=backend, tick_s=0.05), lifespan="on") as url:
        assert backend.calls[0] == "take_over"  # before the first request could be served
        assert about(url)["role"] == "leader"
        until(lambda: "left-1" not in cluster.copies, timeout=10, what="the copy nobody wants stopped, as today")
    assert "let_go" not in backend.calls and backend.calls[-1] == "close"
