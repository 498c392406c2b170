"""The Ray head goes away and comes back, with GCS fault tolerance on (its tables in Redis): its GCS alone, then
the whole head node (GCS, raylet, dashboard, agents: a KubeRay head pod's restart). A `pier up --backend ray`
gateway keeps answering through the copies already running, a new endpoint created meanwhile waits (Creating; its
copy says that the cluster's control store does not answer) instead of failing, and goes InService once the head
is back; the running copy is the same process throughout (not restarted, not doubled).

The cluster is one host: the worker node has an address of its own (127.0.0.2), and the gateway's driver attaches
to its raylet (node_ip_address in --ray-config), as a KubeRay gateway pod's driver attaches to its pod's raylet:
a driver dies with its raylet, and Ray would otherwise attach it to the head's."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.backends import ray_head
from tests.backends.ray_head import RayHead
from tests.backends.test_ray_gateway_e2e import TGI_IMAGE, clients, copies, invoke
from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600),
              pytest.mark.skipif(not ray_head.available(), reason=ray_head.MISSING)]

WORKER_IP = "127.0.0.2"  # the worker node's address; the gateway's driver attaches to its raylet
AWAY_S = 20.0  # how long the GCS stays away: longer than a copy's placement call may take (CALL_S, 15 s)
WAIT = {"Delay": 1, "MaxAttempts": 180}


class Gateway(ServerProcess):
    what = "gateway"


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    pytest.importorskip("ray", reason="the ray backend's tests need Ray (pip install 'pier[ray]')")
    # 4 CPUs: room for both tests' two endpoints (1 CPU an instance at --ray-cpus-per-vcpu 0.25)
    with RayHead(workers=1, worker_cpus=4, worker_ip=WORKER_IP) as started:
        yield started


@pytest.fixture(scope="module")
def gateway(head: RayHead, tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    folder = tmp_path_factory.mktemp("pier")
    config = folder / "ray.yaml"
    # model_transfer always: models reach the node through the object store of the driver's raylet, as on
    # KubeRay (a worker pod does not see the gateway's folder); a driver whose raylet is gone dies at its first
    # ray.put ("The connection to the plasma store is failed. Terminate the process.").
    config.write_text(f"memory: false\nnode_dir: {folder / 'nodes'}\ncapacity_wait_s: 20\n"
                      f"node_ip_address: {WORKER_IP}\nmodel_transfer: always\n")
    argv = [sys.executable, "-m", "pier.gateway", "--port", str(free_port()), "--state-dir", str(folder / "state"),
            "--backend", "ray", "--ray-address", head.address, "--ray-config", str(config),
            "--ray-cpus-per-vcpu", "0.25"]
    # A driver whose GCS is away longer than this exits (Ray's own deadline, 60 s unless set): the gateway's too.
    environment = pier_environment(OMP_WAIT_POLICY="passive",
                                   RAY_gcs_rpc_server_reconnect_timeout_s=str(ray_head.RECONNECT_S))
    process = Gateway(argv, int(argv[4]), folder / "gateway.log", environment)
    try:
        yield process.wait_ready(120)
    finally:
        process.stop(60)


def create(sagemaker: Any, name: str, model_dir: Path) -> None:
    sagemaker.create_model(ModelName=name, ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"Image": TGI_IMAGE, "ModelDataUrl": f"file://{model_dir}",
                                             "Environment": {"HF_MODEL_ID": "pier/tiny", "MAX_TOTAL_TOKENS": "512"}})
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c7g.xlarge",
        "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name)


class Steady:
    """Invocations one after another on a thread, each counted as answered or failed (with why)."""

    def __init__(self, runtime: Any, endpoint: str) -> None:
        self.runtime, self.endpoint = runtime, endpoint
        self.answered, self.failed, self.slowest_s = 0, list[str](), 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            started = time.monotonic()
            try:
                assert invoke(self.runtime, self.endpoint)
                self.answered += 1
                self.slowest_s = max(self.slowest_s, time.monotonic() - started)
            except Exception as error:
                self.failed.append(f"{type(error).__name__}: {error}")
            time.sleep(0.2)

    def stop(self) -> None:
        self._done.set()
        self._thread.join(60)


def test_copies_answer_while_the_gcs_is_away_and_a_new_endpoint_waits_for_it(
        head: RayHead, gateway: Gateway, tiny_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.gguf").symlink_to(tiny_gguf)
    sagemaker, runtime = clients(gateway.url)
    create(sagemaker, "steady", tmp_path / "model")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="steady", WaiterConfig=WAIT)
    (before,) = copies(gateway.url, "steady/AllTraffic")
    assert any(key.startswith(f"RAY{ray_head.NAMESPACE}") for key in head.redis.stored())  # the GCS's tables

    steady = Steady(runtime, "steady")
    try:
        time.sleep(2)
        head.kill_gcs()
        away = time.monotonic()
        create(sagemaker, "during", tmp_path / "model")  # the control plane is pier's own: it takes the request
        until(lambda: time.monotonic() - away > AWAY_S, timeout=AWAY_S + 5, what="the GCS away")
        assert sagemaker.describe_endpoint(EndpointName="during")["EndpointStatus"] == "Creating"
        (waiting,) = copies(gateway.url, "during/AllTraffic")
        assert waiting["state"] == "Starting" and "control store" in waiting["message"], waiting
        answered_while_away = steady.answered
        head.start_gcs()
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="during", WaiterConfig=WAIT)
    finally:
        steady.stop()
    assert not steady.failed, steady.failed[:3]
    assert answered_while_away >= AWAY_S  # one every 0.2 s plus its answer: the copy kept answering
    (after,) = copies(gateway.url, "steady/AllTraffic")
    assert (after["copy_id"], after["pid"], after["restarts"], after["state"]) == (
        before["copy_id"], before["pid"], 0, "Ready")  # the same process: not restarted, not doubled
    log = httpx.get(f"{gateway.url}/pier/copies/{waiting['copy_id']}/logs", timeout=10).text
    assert "control store" in log  # the copy's log says why it waited
    assert invoke(runtime, "during") and invoke(runtime, "steady")


def test_copies_answer_while_the_whole_head_node_restarts_and_a_new_endpoint_waits_for_it(
        head: RayHead, gateway: Gateway, tiny_gguf: Path, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "model.gguf").symlink_to(tiny_gguf)
    sagemaker, runtime = clients(gateway.url)
    create(sagemaker, "calm", tmp_path / "model")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="calm", WaiterConfig=WAIT)
    (before,) = copies(gateway.url, "calm/AllTraffic")

    steady = Steady(runtime, "calm")
    try:
        time.sleep(2)
        killed = head.kill_head()
        away = time.monotonic()
        assert {"gcs_server", "raylet"} <= set(killed) and len(killed) >= 6, killed  # the whole head node
        assert not head.head_node() and head.gcs() is None
        (tmp_path / "other").mkdir()  # another model (another digest): sent to the node once the head is back
        (tmp_path / "other" / "model.gguf").symlink_to(tiny_gguf)
        (tmp_path / "other" / "README").write_text("the same weights, another model folder\n")
        create(sagemaker, "patient", tmp_path / "other")
        until(lambda: time.monotonic() - away > AWAY_S, timeout=AWAY_S + 5, what="the head away")
        assert sagemaker.describe_endpoint(EndpointName="patient")["EndpointStatus"] == "Creating"
        (waiting,) = copies(gateway.url, "patient/AllTraffic")
        assert waiting["state"] == "Starting" and "control store" in waiting["message"], waiting
        answered_while_away = steady.answered
        restarting = time.monotonic()
        head.start_head()  # `ray start --head` as the pod runs it: the same port, Redis and namespace
        head_up = time.monotonic()
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="patient", WaiterConfig=WAIT)
        in_service = time.monotonic()
    finally:
        steady.stop()
    print(f"\nwhole head node: {len(killed)} processes killed ({', '.join(killed)}); away {restarting - away:.1f} s; "
          f"ray start --head took {head_up - restarting:.1f} s; the waiting endpoint InService "
          f"{in_service - head_up:.1f} s after it ({in_service - away:.1f} s after the kill); "
          f"{steady.answered} invocations answered ({answered_while_away} while away), {len(steady.failed)} failed, "
          f"slowest {steady.slowest_s:.2f} s")
    assert gateway.process.poll() is None  # the gateway's driver outlived the head: it hangs off the worker's raylet
    assert not steady.failed, steady.failed[:3]
    assert answered_while_away >= AWAY_S  # one every 0.2 s plus its answer: the copy kept answering
    (after,) = copies(gateway.url, "calm/AllTraffic")
    assert (after["copy_id"], after["pid"], after["restarts"], after["state"]) == (
        before["copy_id"], before["pid"], 0, "Ready")  # the same process: not restarted, not doubled
    assert invoke(runtime, "patient") and invoke(runtime, "calm")
