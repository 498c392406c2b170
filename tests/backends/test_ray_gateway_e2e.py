"""`pier up --backend ray` as a user meets it: a gateway process joined to a Ray cluster of three nodes on this
machine, driven with boto3 exactly as the seeds drive SageMaker. In order: a classic endpoint of two instances
(one copy on each of two nodes), an inference component of three copies over three nodes, their logs and
metrics through the gateway, a gateway killed and started again (the same copies, none twice), a node killed
(its copies come back elsewhere while requests keep being answered), and deletes that leave nothing behind.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.backends.ray_cluster import copy_actors, instance_groups, lose_node, node_ids, ray_cluster
from tests.server.processes import ServerProcess, metric, pier_environment
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

WAIT = {"Delay": 1, "MaxAttempts": 180}
TGI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1-tgi2.0-gpu-py310"
GENERATE = {"inputs": "What is deep learning?", "parameters": {"max_new_tokens": 4}}
LONG = 450  # tokens: answers still in flight when a node dies (the copies hold 512 tokens)
NODE_CPUS = 3  # three ml.c7g.xlarge instances per node at 0.25 CPU per vCPU: room for five after losing a node


class RayGateway(ServerProcess):
    what = "gateway"

    def __init__(self, state_dir: Path, port: int, log: Path, address: str, config: Path) -> None:
        self.state_dir, self.address, self.config = state_dir, address, config
        argv = [sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir", str(state_dir),
                "--backend", "ray", "--ray-address", address, "--ray-config", str(config),
                "--ray-cpus-per-vcpu", "0.25"]
        super().__init__(argv, port, log, pier_environment(OMP_WAIT_POLICY="passive"))

    def again(self) -> RayGateway:
        return RayGateway(self.state_dir, self.port, self.log, self.address, self.config)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with ray_cluster(workers=2, cpus=NODE_CPUS) as started:
        yield started


@pytest.fixture(scope="module")
def model_dir(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "model.gguf").symlink_to(tiny_gguf)
    return folder


@pytest.fixture(scope="module")
def gateway(cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayGateway]:
    folder = tmp_path_factory.mktemp("pier")
    config = folder / "ray.yaml"
    config.write_text(f"memory: false\nnode_dir: {folder / 'nodes'}\ncapacity_wait_s: 20\n")
    process = RayGateway(folder / "state", free_port(), folder / "gateway.log", cluster.address, config)
    try:
        yield process.wait_ready(120)
    finally:
        process.stop(60)  # the last gateway: a restart swaps its process in


def clients(url: str) -> tuple[Any, Any]:
    settings = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x",
                "aws_secret_access_key": "x"}
    return (boto3.client("sagemaker", **settings),
            boto3.client("sagemaker-runtime", **settings, config=Config(retries={"max_attempts": 1})))


def invoke(runtime: Any, endpoint: str, **extra: Any) -> str:
    reply = runtime.invoke_endpoint(EndpointName=endpoint, ContentType="application/json", Body=json.dumps(GENERATE),
                                    **extra)
    text: str = json.loads(reply["Body"].read())[0]["generated_text"]
    return text


def copies(url: str, component: str | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = httpx.get(f"{url}/pier/copies", timeout=10).json()["copies"]
    return [c for c in rows if component is None or c["component"] == component]


def node_of(copy_id: str) -> str | None:
    """The node of the copy's actor; None while it has no live actor."""
    import ray
    from ray.exceptions import GetTimeoutError, RayActorError

    try:
        identity = ray.get(ray.get_actor(f"pier-copy-{copy_id}").identity.remote(), timeout=5)
    except (RayActorError, GetTimeoutError, ValueError):
        return None
    node: str = identity.node_id
    return node


def test_boto3_seed_flow_two_instances_one_copy_on_each_node(gateway: RayGateway, model_dir: Path) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_model(ModelName="llama-ray", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"Image": TGI_IMAGE, "ModelDataUrl": f"file://{model_dir}",
                                             "Environment": {"HF_MODEL_ID": "pier/tiny", "MAX_TOTAL_TOKENS": "512"}})
    sagemaker.create_endpoint_config(EndpointConfigName="llama-ray", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "llama-ray", "InstanceType": "ml.c7g.xlarge",
        "InitialInstanceCount": 2}])
    sagemaker.create_endpoint(EndpointName="llama-ray", EndpointConfigName="llama-ray")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llama-ray", WaiterConfig=WAIT)

    running = copies(gateway.url, "llama-ray/AllTraffic")
    assert len(running) == 2 and all(c["state"] == "Ready" for c in running)
    assert len({node_of(c["copy_id"]) for c in running}) == 2  # one instance, and its copy, per node
    assert all(c["url"].startswith("http://") and "127.0.0.1" not in c["url"] for c in running)  # the node's address
    for _ in range(4):
        assert invoke(runtime, "llama-ray")
    described = sagemaker.describe_endpoint(EndpointName="llama-ray")
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 2


def test_an_inference_component_of_three_copies_over_three_nodes(gateway: RayGateway) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_endpoint_config(EndpointConfigName="multi-ray", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.c7g.xlarge", "InitialInstanceCount": 3}])
    sagemaker.create_endpoint(EndpointName="multi-ray", EndpointConfigName="multi-ray")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="multi-ray", WaiterConfig=WAIT)
    sagemaker.create_inference_component(
        InferenceComponentName="multi-ray-tiny", EndpointName="multi-ray", VariantName="AllTraffic",
        Specification={"ModelName": "llama-ray", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 3})
    until(lambda: component(sagemaker)["InferenceComponentStatus"] == "InService", timeout=180, what="InService")
    assert component(sagemaker)["RuntimeConfig"] == {"DesiredCopyCount": 3, "CurrentCopyCount": 3}

    running = copies(gateway.url, "multi-ray-tiny")
    assert {node_of(c["copy_id"]) for c in running} == node_ids()  # packed one per instance, spread over nodes
    for _ in range(9):
        assert invoke(runtime, "multi-ray", InferenceComponentName="multi-ray-tiny")


def test_an_adapter_runs_on_the_base_s_copies_on_their_nodes(gateway: RayGateway, tmp_path: Path) -> None:
    """A LoRA adapter component on the component of three copies (one per node): each copy is sent the adapter's
    file where its node reads it (Backend.path_on), loads it and answers under it."""
    from pier.synthetic.builder import TINY
    from pier.synthetic.lora import build_lora_gguf

    (tmp_path / "lora").mkdir()
    build_lora_gguf(tmp_path / "lora" / "adapter.gguf", TINY, seed=5)
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_inference_component(
        InferenceComponentName="multi-ray-lora", EndpointName="multi-ray",
        Specification={"BaseInferenceComponentName": "multi-ray-tiny",
                       "Container": {"ArtifactUrl": f"file://{tmp_path / 'lora'}"}})
    until(lambda: sagemaker.describe_inference_component(InferenceComponentName="multi-ray-lora")[
        "InferenceComponentStatus"] == "InService", timeout=60, what="the adapter InService")
    def answer(name: str) -> str:
        body = {"inputs": "What is deep learning?", "parameters": {"max_new_tokens": 12, "do_sample": False}}
        reply = runtime.invoke_endpoint(EndpointName="multi-ray", InferenceComponentName=name,
                                        ContentType="application/json", Body=json.dumps(body))
        return str(json.loads(reply["Body"].read())[0]["generated_text"])

    try:
        base = answer("multi-ray-tiny")
        with ThreadPoolExecutor(9) as pool:  # at once, so that least-outstanding routing spreads them over copies
            together = list(pool.map(lambda _: answer("multi-ray-lora"), range(9)))
        # Batched nine at a time, a random model's near ties may flip a late token between answers; each is the
        # adapter's, not the base's. One at a time, every copy computes the same answer.
        assert all(text != base for text in together)
        alone = {answer("multi-ray-lora") for _ in range(3)}
        assert len(alone) == 1 and alone != {base}
        (row,) = httpx.get(f"{gateway.url}/pier/adapters", timeout=10).json()["adapters"]
        assert len(row["LoadedOn"]) >= 2, row  # loaded on copies on different nodes
    finally:
        sagemaker.delete_inference_component(InferenceComponentName="multi-ray-lora")
        until(lambda: "multi-ray-lora" not in {c["InferenceComponentName"] for c in sagemaker.list_inference_components(
            EndpointNameEquals="multi-ray")["InferenceComponents"]}, timeout=30, what="the adapter deleted")


def component(sagemaker: Any) -> dict[str, Any]:
    return sagemaker.describe_inference_component(InferenceComponentName="multi-ray-tiny")


def test_remote_copies_logs_and_metrics_reach_the_gateway(gateway: RayGateway) -> None:
    running = copies(gateway.url, "multi-ray-tiny")

    def logs() -> list[str]:
        return [httpx.get(f"{gateway.url}/pier/copies/{c['copy_id']}/logs", timeout=10).text for c in running]

    assert all("actor on node" in log and "Application startup complete" in log for log in logs())
    # The requests' lines, written on the nodes, mirrored within a second or so.
    until(lambda: any('"POST /invocations' in log for log in logs()), timeout=30, what="request lines mirrored")
    metrics = httpx.get(f"{gateway.url}/metrics", timeout=30).text
    assert 'pier_copies{component="multi-ray-tiny",state="Ready"} 3.0' in metrics
    for copy in running:
        assert f'copy="{copy["copy_id"]}"' in metrics  # every copy's own series, labelled
    served = [float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
              if line.startswith("pier_http_requests_total") and 'route="/invocations"' in line
              and 'component="multi-ray-tiny"' in line]
    assert sum(served) >= 9, served


def test_a_gateway_killed_and_started_again_takes_over_the_same_copies(gateway: RayGateway) -> None:
    before = {c["copy_id"]: c for c in copies(gateway.url)}
    assert len(before) == 5
    gateway.process.send_signal(signal.SIGKILL)  # a crash: nothing is stopped on the way out
    gateway.process.wait(30)
    assert copy_actors() == sorted(f"pier-copy-{c}" for c in before)  # still running on the cluster
    again = gateway.again()
    gateway.process = again.process  # the module's fixture stops whichever runs last
    again.wait_ready(120)
    sagemaker, runtime = clients(gateway.url)

    def same_copies_ready() -> bool:
        now = {c["copy_id"]: c for c in copies(gateway.url)}
        return now.keys() == before.keys() and all(c["state"] == "Ready" for c in now.values())

    until(same_copies_ready, timeout=60, what="the same copies ready again")
    now = {c["copy_id"]: c for c in copies(gateway.url)}
    assert {k: (c["pid"], c["url"]) for k, c in now.items()} == {k: (c["pid"], c["url"]) for k, c in before.items()}
    assert copy_actors() == sorted(f"pier-copy-{c}" for c in before) and len(instance_groups()) == 5
    assert {e["EndpointName"]: e["EndpointStatus"] for e in sagemaker.list_endpoints()["Endpoints"]} == {
        "llama-ray": "InService", "multi-ray": "InService"}
    assert invoke(runtime, "llama-ray")
    assert invoke(runtime, "multi-ray", InferenceComponentName="multi-ray-tiny")


def test_a_dead_node_s_copies_come_back_elsewhere_while_requests_are_answered(cluster: Any,
                                                                             gateway: RayGateway) -> None:
    sagemaker, runtime = clients(gateway.url)
    where = {c["copy_id"]: node_of(c["copy_id"]) for c in copies(gateway.url)}
    workers = {node.node_id for node in cluster.worker_nodes}
    lost = max(workers, key=lambda node: sum(1 for n in where.values() if n == node))  # the busiest worker
    victims = {copy_id for copy_id, node in where.items() if node == lost}
    assert victims
    # Long answers in flight on every copy of the component (least outstanding spreads them), so some are on the
    # node when it dies: those are resumed on another copy and complete.
    long_ones: list[Any] = [None] * 6

    def long_answer(i: int) -> None:
        body = {"model": "multi-ray-tiny", "prompt": f"{i} what is deep learning?", "max_tokens": LONG,
                "ignore_eos": True}
        try:
            reply = httpx.post(f"{gateway.url}/v1/completions", json=body, timeout=120)
            long_ones[i] = reply.json()["usage"]["completion_tokens"] if reply.status_code == 200 else reply.text
        except Exception as error:
            long_ones[i] = error

    threads = [threading.Thread(target=long_answer, args=(i,)) for i in range(len(long_ones))]
    for thread in threads:
        thread.start()
    doomed = next(c for c in copies(gateway.url, "multi-ray-tiny") if c["copy_id"] in victims)
    # through the gateway's /metrics: a copy answers only its gateway (its secret), /metrics too
    until(lambda: metric(gateway.url, "pier_requests_in_flight", copy=doomed["copy_id"],
                         component="multi-ray-tiny") >= 1, timeout=30, interval=0.05,
          what="a long answer in flight on the node")
    lose_node(cluster, lost)
    for thread in threads:
        thread.join(120)
    assert long_ones == [LONG] * len(long_ones)  # every answer whole
    assert "resuming it on another copy" in gateway.output()

    answered, failed = 0, []

    def back() -> bool:
        nonlocal answered
        for endpoint, extra in (("llama-ray", {}), ("multi-ray", {"InferenceComponentName": "multi-ray-tiny"})):
            try:
                assert invoke(runtime, endpoint, **extra)
                answered += 1
            except Exception as error:
                failed.append(f"{endpoint} at {time.strftime('%H:%M:%S')}: {error}")
        now = {c["copy_id"]: c for c in copies(gateway.url)}
        return now.keys() == where.keys() and all(c["state"] == "Ready" for c in now.values()) and all(
            node_of(v) not in (None, lost) for v in victims)

    until(back, timeout=180, interval=0.05, what="the dead node's copies back on other nodes")
    # A request that reaches a victim copy before the gateway learns of the death is resumed on another copy (the
    # data plane's failover), and the router never picks a copy the backend reports dead, nor one that refuses:
    # every request is answered.
    assert not failed, f"{len(failed)} requests failed ({answered} answered): {failed}"
    assert answered >= 4
    assert sagemaker.describe_endpoint(EndpointName="llama-ray")["EndpointStatus"] == "InService"
    assert sagemaker.describe_endpoint(EndpointName="multi-ray")["EndpointStatus"] == "InService"
    assert component(sagemaker)["InferenceComponentStatus"] == "InService"
    assert all(node_of(c) in node_ids() for c in where)
    restarted = {c["copy_id"]: c["restarts"] for c in copies(gateway.url)}
    assert all(restarted[v] >= 1 for v in victims)
    assert all(restarted[c] == 0 for c in where if c not in victims)  # the other copies were left alone
    log = httpx.get(f"{gateway.url}/pier/copies/{sorted(victims)[0]}/logs", timeout=10).text
    assert "its Ray node died" in log


def test_deletes_leave_no_copy_and_no_instance_behind(gateway: RayGateway) -> None:
    sagemaker, _ = clients(gateway.url)
    sagemaker.delete_inference_component(InferenceComponentName="multi-ray-tiny")
    until(lambda: not sagemaker.list_inference_components(EndpointNameEquals="multi-ray")["InferenceComponents"],
          what="component gone")
    for name in ("multi-ray", "llama-ray"):
        sagemaker.delete_endpoint(EndpointName=name)
        sagemaker.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig=WAIT)
    assert copies(gateway.url) == []
    until(lambda: copy_actors() == [] and instance_groups() == [], timeout=30, what="actors and instances gone")
