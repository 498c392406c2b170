"""An adapter (a LoRA inference component) invoked through a follower whose host does not have the folder the
leader fetched it to: two `pier up` on one PostgreSQL with different state folders, the local backend, a TINY
model and an adapter given as a model.tar.gz. The follower fetches the adapter into its own state folder's
`models/` (at the same place as the leader's: the store is keyed by content) and the base's copy answers with
it, as it answers through the leader.

Both gateways run on this host, so the leader's folder is moved away while the follower is invoked (the leader
stopped meanwhile, so its reconciler does not fetch it back): the follower sees what a follower on another host
sees."""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.lora import build_lora_gguf
from tests.e2e.gateway_process import GatewayProcess
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.runtime.servers import runtime_client
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT, BASE, ADAPTER = "lora-endpoint", "lora-base", "lora-0"
PROMPT = "the quick brown fox jumps over the lazy dog and then the cat sat on the mat"


def role(gateway: GatewayProcess) -> dict[str, Any]:
    return httpx.get(gateway.url + "/pier", timeout=5).json()  # type: ignore[no-any-return]


def artifacts(folder: Path) -> tuple[Path, Path]:
    """A TINY model (F32, as the adapter tests use) and an adapter for it packed as a model.tar.gz."""
    model = build_gguf(folder / "model.gguf", TINY, quant="F32")
    build_lora_gguf(folder / "adapter.gguf", TINY, seed=100)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(folder / "adapter.gguf", arcname="adapter.gguf")
    (folder / "adapter.tar.gz").write_bytes(buffer.getvalue())
    return model, folder / "adapter.tar.gz"


def deploy(sagemaker: Any, model: Path, adapter: Path) -> None:
    sagemaker.create_model(ModelName="tiny-f32", PrimaryContainer={
        "ModelDataUrl": f"file://{model}", "Environment": {"MAX_TOTAL_TOKENS": "1024"}})
    sagemaker.create_endpoint_config(EndpointConfigName=ENDPOINT, ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=ENDPOINT)
    until(lambda: sagemaker.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "InService",
          timeout=120, what="the endpoint InService")
    sagemaker.create_inference_component(
        InferenceComponentName=BASE, EndpointName=ENDPOINT, VariantName="AllTraffic",
        Specification={"ModelName": "tiny-f32", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}}, RuntimeConfig={"CopyCount": 1})
    sagemaker.create_inference_component(
        InferenceComponentName=ADAPTER, EndpointName=ENDPOINT,
        Specification={"BaseInferenceComponentName": BASE, "Container": {"ArtifactUrl": f"file://{adapter}"}})
    for name in (BASE, ADAPTER):
        until(lambda name=name: sagemaker.describe_inference_component(InferenceComponentName=name)[
            "InferenceComponentStatus"] == "InService", timeout=180, what=f"{name} InService")


def generate(url: str, component: str) -> str:
    reply = runtime_client(url).invoke_endpoint(
        EndpointName=ENDPOINT, InferenceComponentName=component, ContentType="application/json",
        Body=json.dumps({"inputs": PROMPT, "parameters": {
            "max_new_tokens": 12, "do_sample": False, "return_full_text": False}}))
    return str(json.loads(reply["Body"].read())[0]["generated_text"])


def fetched_to(models: Path) -> Path:
    """Where the leader fetched the adapter: a folder of its model store (the record's, not in the API)."""
    [found] = models.glob("sha256/*/adapter.gguf")
    return found.parent


def test_a_follower_on_another_host_fetches_the_adapter_itself(tmp_path: Path,
                                                               postgres_server: PostgresServer) -> None:
    model, adapter = artifacts(tmp_path)
    url = postgres_server.database()
    with GatewayProcess(tmp_path / "a", free_port(), tmp_path / "a.log", options=("--state-url", url)) as leader:
        leader.wait_ready()
        until(lambda: role(leader)["role"] == "leader", timeout=20, what="the first gateway leading")
        with GatewayProcess(tmp_path / "b", free_port(), tmp_path / "b.log",
                            options=("--state-url", url)) as follower:
            follower.wait_ready()
            until(lambda: role(follower)["leader"] == role(leader)["gateway"], timeout=20, what="a follower")
            deploy(sagemaker_client(follower.url), model, adapter)
            leaders = fetched_to(tmp_path / "a" / "models")
            base = generate(follower.url, BASE)

            os.kill(leader.process.pid, signal.SIGSTOP)  # its reconciler would fetch the folder back
            away = tmp_path / "away"
            leaders.rename(away)  # what a follower on another host sees: no such folder
            try:
                through_follower = generate(follower.url, ADAPTER)
            finally:
                away.rename(leaders)
                os.kill(leader.process.pid, signal.SIGCONT)
            own = tmp_path / "b" / "models" / leaders.relative_to(tmp_path / "a" / "models") / "adapter.gguf"
            assert own.read_bytes() == (leaders / "adapter.gguf").read_bytes()  # the follower's own, same place
            assert through_follower != base  # the adapter was applied
            assert generate(leader.url, ADAPTER) == through_follower
