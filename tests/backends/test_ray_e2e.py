"""The ray backend on a real cluster of three nodes on this machine, with real model servers on a TINY GGUF:
instances spread over nodes, copies packed into them, a dead actor or a dead node replaced, a new gateway taking
over, models copied to nodes that cannot see them, missing capacity in words until a node brings it.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus, Instance
from pier.backends.ray import RayBackend, RayConfig, RayUnavailable
from pier.backends.ray.config import TypeMapping
from tests.backends.conftest import COPY_ENV, FAST
from tests.backends.loop import LoopThread
from tests.backends.ray_cluster import copy_actors, instance_groups, node_args, node_ids, ray_cluster, worker_of

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

XL = ("ml.c7g.xlarge", 4, 8192)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with ray_cluster(workers=2) as started:
        yield started


def instance(variant: str, index: int, owned: tuple[int, ...] = (0, 1, 2, 3), itype: tuple[str, int, int] = XL
             ) -> Instance:
    return Instance(variant, index, *itype, 0, owned)


def spec(copy_id: str, model_dir: Path, where: Instance, component: str = "ic") -> CopySpec:
    return CopySpec(copy_id, component, model_dir, dict(COPY_ENV), cores=(0,), instance=where)


@dataclasses.dataclass
class Running:
    loop: LoopThread
    backend: RayBackend

    def start(self, *specs: CopySpec) -> None:
        for one in specs:
            self.loop.run(self.backend.start(one))

    def stop(self, copy_id: str) -> None:
        self.loop.run(self.backend.stop(copy_id), timeout=60)

    def status(self, copy_id: str) -> CopyStatus:
        return next(s for s in self.backend.statuses() if s.copy_id == copy_id)

    def wait_for(self, condition: Callable[[], Any], timeout: float = 120.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        while not (value := condition()):
            if time.monotonic() > deadline:
                logs = {s.copy_id: self._logs(s.copy_id) for s in self.backend.statuses()}
                raise AssertionError(f"timed out waiting for {what}: {self.backend.statuses()}\n{logs}")
            time.sleep(0.1)
        return value

    def wait_ready(self, *copy_ids: str, timeout: float = 120.0) -> None:
        self.wait_for(lambda: all(self.status(c).state is CopyState.READY for c in copy_ids), timeout,
                      f"{copy_ids} to be ready")

    def _logs(self, copy_id: str) -> str:
        try:
            return self.backend.logs(copy_id, 15)
        except KeyError:
            return ""


def backend_of(state_dir: Path, **config: Any) -> RayBackend:
    settings = {"cpus_per_vcpu": 0.25, "memory": False, "node_dir": str(state_dir.parent / "nodes"),
                "capacity_wait_s": 3.0, "keep_copies": False, **config}
    return RayBackend(state_dir, RayConfig(**settings), FAST, report_s=0.2)


@contextmanager
def backend_on(state_dir: Path, **config: Any) -> Iterator[Running]:
    """A ray backend on a loop of its own, leading; at the end it stops its copies (unless told to keep them)."""
    loop = LoopThread()
    backend = backend_of(state_dir, **config)
    backend.connect()
    loop.run(backend.take_over())  # as a gateway does when it leads
    try:
        yield Running(loop, backend)
    finally:
        loop.run(backend.close(), timeout=120)
        loop.close()


@pytest.fixture
def running(cluster: Any, tmp_path: Path) -> Iterator[Running]:
    with backend_on(tmp_path / "state") as started:
        yield started
    assert copy_actors() == [] and instance_groups() == [], "copies or instances left behind"


def generate(copy: CopyStatus, secret: str | None = None) -> httpx.Response:
    """A request straight to the copy, with the secret the gateway would send (or `secret`)."""
    assert copy.url, copy
    headers = {"X-Pier-Copy-Secret": copy.secret if secret is None else secret}
    return httpx.post(copy.url + "/generate", json={"inputs": "the cat", "parameters": {"max_new_tokens": 2}},
                      headers=headers, timeout=30)


def actor_identity(copy_id: str) -> Any:
    import ray

    return ray.get(ray.get_actor(f"pier-copy-{copy_id}").identity.remote(), timeout=30)


def test_instances_spread_over_nodes_and_copies_pack_into_them(running: Running, model_dir: Path) -> None:
    classic = [spec(f"big-{i}", model_dir, instance("big/AllTraffic", i), "big/AllTraffic") for i in range(3)]
    packed = [spec(f"ic-{n}", model_dir, instance("multi/AllTraffic", 0, (n,))) for n in range(2)]
    running.start(*classic, *packed)
    running.wait_ready(*(s.copy_id for s in classic + packed))

    nodes = [running.backend.node_of(s.copy_id) for s in classic]
    assert set(nodes) == node_ids()  # three instances, three nodes
    assert running.backend.node_of("ic-0") == running.backend.node_of("ic-1")  # one instance, one node
    groups = instance_groups()
    assert len(groups) == 4 and len([g for g in groups if g.startswith("pier-instance-multi-alltraffic-0-")]) == 1

    for copy in classic + packed:
        status = running.status(copy.copy_id)
        assert status.url and status.pid and status.message == "" and status.restarts == 0
        assert generate(status).status_code == 200
        assert generate(status, secret="guess").status_code == 403  # it answers only its gateway
        environ = dict(line.split("=", 1) for line in
                       Path(f"/proc/{status.pid}/environ").read_text().split("\0") if "=" in line)
        assert environ["PIER_COPY_SECRET"] == status.secret and len(status.secret or "") > 30
        assert "OMP_NUM_THREADS" not in environ  # Ray's 1 for its workers is not the model server's
        nice = int(Path(f"/proc/{status.pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
        assert nice == 0  # Ray's workers run at nice 15; a model server serves users at normal priority
        argv = Path(f"/proc/{status.pid}/cmdline").read_text().split("\0")
        assert argv[argv.index("--host") + 1] == status.url.split("//")[1].split(":")[0]
    assert len({running.status(c.copy_id).secret for c in classic + packed}) == 5  # a secret per copy

    log = running.backend.logs("big-0")
    assert "actor on node" in log and "Application startup complete" in log
    assert f"instance group {groups[0]}" in log or "instance group pier-instance-big-alltraffic-0-" in log

    started = time.monotonic()
    running.stop("ic-1")
    assert time.monotonic() - started < FAST.grace_s  # it drained on SIGTERM
    assert "stopped by pier: the process exited with code 0" in running.backend.logs("ic-1")
    assert len(instance_groups()) == 4  # ic-0 still uses the instance
    running.stop("ic-0")
    assert len(instance_groups()) == 3 and "pier-copy-ic-0" not in copy_actors()


def test_a_copy_whose_actor_dies_comes_back_in_its_instance(running: Running, model_dir: Path) -> None:
    running.start(spec("solo", model_dir, instance("solo/AllTraffic", 0)), spec("other", model_dir,
                                                                                  instance("solo/AllTraffic", 1)))
    running.wait_ready("solo", "other")
    before, other = running.status("solo"), running.status("other")
    group = instance_groups()
    os.kill(actor_identity("solo").pid, signal.SIGKILL)
    running.wait_for(lambda: running.status("solo").state is not CopyState.READY, 15, "the death to be noticed")
    assert running.status("solo").url is None  # no traffic to a copy whose actor is gone
    served = 0
    while running.status("solo").state is not CopyState.READY:
        assert generate(other).status_code == 200
        served += 1
        assert served < 500, f"solo did not come back: {running.status('solo')}"
    after = running.status("solo")
    assert served > 0 and after.restarts == 1 and after.pid != before.pid and after.url
    assert generate(after).status_code == 200
    assert instance_groups() == group  # the same instance, not a new one
    assert running.status("other").pid == other.pid
    assert "its Ray actor's process died; starting it again" in running.backend.logs("solo")


def test_a_dead_node_takes_its_copies_elsewhere_while_the_others_serve(cluster: Any, running: Running,
                                                                       model_dir: Path) -> None:
    copies = [spec(f"n-{i}", model_dir, instance("n/AllTraffic", i), "n/AllTraffic") for i in range(2)]
    running.start(*copies)
    running.wait_ready("n-0", "n-1")
    head = cluster.head_node.node_id
    victim = next(c.copy_id for c in copies if running.backend.node_of(c.copy_id) != head)
    survivor = next(c.copy_id for c in copies if c.copy_id != victim)
    lost = running.backend.node_of(victim)
    assert lost is not None
    try:
        cluster.remove_node(worker_of(cluster, lost), allow_graceful=False)
        running.wait_for(lambda: running.status(victim).state is not CopyState.READY, 30, "the node's death")
        served = 0
        while running.status(victim).state is not CopyState.READY:
            assert generate(running.status(survivor)).status_code == 200
            served += 1
            assert served < 2000, f"{victim} did not come back: {running.status(victim)}"
        moved = running.backend.node_of(victim)
        assert served > 0 and moved not in (None, lost) and moved in node_ids()
        assert generate(running.status(victim)).status_code == 200
        assert running.status(survivor).restarts == 0
        assert "its Ray node died" in running.backend.logs(victim)
    finally:
        cluster.add_node(**node_args())  # the next tests have three nodes again
        cluster.wait_for_nodes()


def test_a_new_gateway_takes_over_running_copies_and_sweeps_unused_instances(cluster: Any, model_dir: Path,
                                                                            tmp_path: Path) -> None:
    from ray.util import placement_group

    state = tmp_path / "state"
    copies = [spec(f"keep-{i}", model_dir, instance("keep/AllTraffic", i), "keep/AllTraffic") for i in range(2)]
    with backend_on(state, keep_copies=True) as first:
        first.start(*copies)
        first.wait_ready("keep-0", "keep-1")
        before = {c.copy_id: first.status(c.copy_id) for c in copies}
    assert copy_actors() == ["pier-copy-keep-0", "pier-copy-keep-1"]  # the first gateway left them running
    orphan = placement_group([{"CPU": 0.1}], name="pier-instance-gone-0-deadbeef", lifetime="detached")
    orphan.wait(30)
    with backend_on(state) as second:
        assert "pier-instance-gone-0-deadbeef" not in instance_groups()
        second.wait_ready("keep-0", "keep-1", timeout=30)
        for copy_id, was in before.items():
            now = second.status(copy_id)
            assert (now.pid, now.url, now.secret, now.restarts) == (was.pid, was.url, was.secret, 0)
        assert copy_actors() == ["pier-copy-keep-0", "pier-copy-keep-1"]  # no duplicates
        second.start(copies[0])  # what the reconciler asks for again is already there
        assert len(second.backend.statuses()) == 2
        log = second.backend.logs("keep-0")
        assert "Application startup complete" in log and "taken over by a new gateway" in log
        assert log.count("Application startup complete") == 1  # mirrored once, not again from the start
    assert copy_actors() == [] and instance_groups() == []


def test_a_leader_lets_go_the_next_takes_over_as_they_are_and_a_follower_touches_nothing(
        cluster: Any, model_dir: Path, tmp_path: Path) -> None:
    from pier.backends.ray.actor import ActorSetup
    from pier.backends.ray.ray_calls import _actor_class

    copies = [spec(f"lead-{i}", model_dir, instance("lead/AllTraffic", i), "lead/AllTraffic") for i in range(2)]
    with backend_on(tmp_path / "a", keep_copies=True) as first:
        first.start(*copies)
        first.wait_ready("lead-0", "lead-1")
        before = {c.copy_id: first.status(c.copy_id) for c in copies}
        # An actor its leader is still creating: the model is not on its node yet, its model server not started.
        half = spec("half", model_dir, instance("half/AllTraffic", 0))
        _actor_class().options(name="pier-copy-half", namespace="pier", lifetime="detached", num_cpus=0).remote(
            half, "secret", ActorSetup(str(tmp_path / "nodes"), FAST, "pier-instance-half-0-x", 0))
        follower = backend_of(tmp_path / "b")
        follower.connect()  # `pier up` of a second gateway, which follows: it joins and owns nothing
        assert follower.statuses() == []
        first.wait_for(lambda: "pier-copy-half" in copy_actors(), 30, "the half-made actor")
        assert copy_actors() == ["pier-copy-half", "pier-copy-lead-0", "pier-copy-lead-1"]  # none killed by it

        first.loop.run(first.backend.let_go())  # the leader's lease lost
        assert first.backend.statuses() == []
        assert copy_actors() == ["pier-copy-half", "pier-copy-lead-0", "pier-copy-lead-1"]  # none stopped
        assert len(instance_groups()) == 2

        first.loop.run(follower.take_over())  # the next leader
        leader = Running(first.loop, follower)
        leader.wait_ready("lead-0", "lead-1", timeout=30)
        for copy_id, was in before.items():
            now = leader.status(copy_id)
            assert (now.pid, now.url, now.secret, now.restarts) == (was.pid, was.url, was.secret, 0)
        # the half-made one is killed: nobody would finish it, and the reconciler starts its copy again if wanted
        assert copy_actors() == ["pier-copy-lead-0", "pier-copy-lead-1"]
        assert [s.copy_id for s in follower.statuses()] == ["lead-0", "lead-1"]
        assert "taken over by a new gateway" in follower.logs("lead-0")
        first.loop.run(follower.close(), timeout=120)  # keep_copies false: it stops what it owns
    assert copy_actors() == [] and instance_groups() == []


def test_a_node_that_cannot_see_the_model_gets_a_copy_of_it(running: Running, model_dir: Path,
                                                           tmp_path: Path) -> None:
    running.backend.config = running.backend.config.model_copy(update={"model_transfer": "always"})
    running.start(spec("sent", model_dir, instance("sent/AllTraffic", 0)))
    running.wait_ready("sent")
    status = running.status("sent")
    assert status.url and status.pid and generate(status).status_code == 200
    maps = Path(f"/proc/{status.pid}/maps").read_text()
    cache = tmp_path / "nodes" / "models"
    assert str(cache) in maps and str(model_dir) not in maps
    assert "model received into" in running.backend.logs("sent")


def adapted(copy: CopyStatus, adapter: str | None) -> httpx.Response:
    """A greedy answer from the copy straight, under the LoRA adapter at `adapter` (the copy's path), as the
    gateway asks for one (pier.control.adapters)."""
    assert copy.url, copy
    headers = {"X-Pier-Copy-Secret": copy.secret or ""}
    if adapter is not None:
        headers |= {"X-Pier-Adapter": "lora", "X-Pier-Adapter-File": adapter, "X-Pier-Adapter-Scale": "1.0"}
    body = {"inputs": "the quick brown fox jumps over", "parameters": {"max_new_tokens": 8, "do_sample": False}}
    return httpx.post(copy.url + "/generate", json=body, headers=headers, timeout=60)


def test_an_adapter_file_reaches_a_copy_on_a_node_that_cannot_see_it(running: Running, model_dir: Path,
                                                                     tmp_path: Path) -> None:
    """Backend.path_on: the gateway's adapter folder goes to the copy's node once (model_transfer: always makes
    every node one that cannot see the gateway's files), and the copy answers under the adapter from there."""
    from pier.synthetic.builder import TINY
    from pier.synthetic.lora import build_lora_gguf

    (tmp_path / "adapter").mkdir()
    lora = build_lora_gguf(tmp_path / "adapter" / "adapter.gguf", TINY, seed=7)
    (tmp_path / "adapter" / "adapter_model.safetensors").write_bytes(bytes(2**20))  # the PEFT original: not sent
    running.backend.config = running.backend.config.model_copy(update={"model_transfer": "always"})
    running.start(spec("lora", model_dir, instance("lora/AllTraffic", 0)))
    running.wait_ready("lora")
    status = running.status("lora")
    where = running.loop.run(running.backend.path_on("lora", str(lora)))
    cache = tmp_path / "nodes" / "models"
    assert Path(where).parent.parent == cache and Path(where).read_bytes() == lora.read_bytes()
    assert [p.name for p in Path(where).parent.iterdir()] == ["adapter.gguf"]
    sent = Path(where).stat().st_mtime_ns
    assert running.loop.run(running.backend.path_on("lora", str(lora))) == where  # known: nothing sent again
    assert Path(where).stat().st_mtime_ns == sent
    base, under = adapted(status, None), adapted(status, where)
    assert base.status_code == under.status_code == 200, under.text
    assert under.json()["generated_text"] != base.json()["generated_text"]

    lora.write_bytes(build_lora_gguf(tmp_path / "other.gguf", TINY, seed=8).read_bytes())  # changed in place
    follower = backend_of(tmp_path / "follower")  # a gateway that follows owns no copy: it finds the actor by name
    follower.connect()
    again = running.loop.run(follower.path_on("lora", str(lora)))  # an adapter invoked through a follower
    assert again != where and Path(again).read_bytes() == lora.read_bytes()
    assert running.loop.run(running.backend.path_on("lora", str(lora))) == again  # the leader finds it there
    assert adapted(status, again).json()["generated_text"] != under.json()["generated_text"]
    for backend in (running.backend, follower):
        with pytest.raises(RayUnavailable, match="no actor"):
            running.loop.run(backend.path_on("nobody", str(lora)))


def test_missing_capacity_is_reported_until_a_node_brings_it(cluster: Any, tmp_path: Path, model_dir: Path) -> None:
    """An instance type mapped to a custom resource and a node label: it waits, says what is missing, and starts
    when a node that has both joins (what a Ray autoscaler does for a pending placement group)."""
    big = ("ml.c7g.2xlarge", 8, 16384)
    mapped = {"ml.c7g.2xlarge": TypeMapping(resources={"big_node": 1}, labels={"pier-pool": "big"})}
    with backend_on(tmp_path / "state", instance_types=mapped) as running:
        running.start(spec("big", model_dir, instance("big2/AllTraffic", 0, itype=big), "big2/AllTraffic"))
        running.wait_for(lambda: running.status("big").state is CopyState.FAILED, 30, "the copy to give up waiting")
        message = running.status("big").message
        assert ("Waiting for capacity: instance 0 of big2/AllTraffic (ml.c7g.2xlarge) needs 1 big_node on a node "
                "labelled {'pier-pool': 'big'}") in message
        assert "more than any of the cluster's 3 live node(s) has" in message
        decoy = cluster.add_node(**node_args(num_cpus=1, resources={"big_node": 1}))  # the resource, not the label
        time.sleep(3)
        assert running.status("big").state is CopyState.FAILED
        cluster.remove_node(decoy)
        added = cluster.add_node(**node_args(num_cpus=1, resources={"big_node": 1}, labels={"pier-pool": "big"}))
        try:
            running.wait_ready("big")
            assert running.backend.node_of("big") == added.node_id
        finally:
            running.stop("big")
            cluster.remove_node(added)
