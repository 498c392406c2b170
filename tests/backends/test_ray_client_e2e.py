"""`pier up --backend ray --ray-address ray://HOST:PORT`: a gateway that is not a node of the cluster joins it through
Ray Client (as on KubeRay, where the head's client port is what a workstation reaches), places an instance, serves
it through boto3, and leaves nothing behind when the endpoint is deleted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.backends.ray_cluster import copy_actors, instance_groups, ray_cluster
from tests.backends.test_ray_gateway_e2e import GENERATE, RayGateway, clients
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

pytest.importorskip("ray.util.client", reason="ray:// needs Ray Client (pip install 'pier[ray]')")


@pytest.fixture(scope="module")
def client_address() -> Iterator[str]:
    port = free_port()
    with ray_cluster(workers=1, cpus=2, client_port=port):
        yield f"ray://127.0.0.1:{port}"


def test_a_gateway_joined_through_ray_client_serves_and_cleans_up(client_address: str, tiny_gguf: Path,
                                                                  tmp_path: Path) -> None:
    config = tmp_path / "ray.yaml"
    config.write_text(f"memory: false\nnode_dir: {tmp_path / 'nodes'}\ncapacity_wait_s: 20\n")
    gateway = RayGateway(tmp_path / "state", free_port(), tmp_path / "gateway.log", client_address, config)
    try:
        # Ray's client proxy now and then fails to start the server it hands a new driver (its process exits at
        # once, and the driver hears of it 40 s later); the gateway tries again (join_wait_s), so allow two misses.
        gateway.wait_ready(200)
        assert "joining the Ray cluster at ray://" in gateway.log.read_text()
        model = tmp_path / "model"
        model.mkdir()
        (model / "model.gguf").symlink_to(tiny_gguf)
        sagemaker, runtime = clients(gateway.url)
        sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                               PrimaryContainer={"ModelDataUrl": f"file://{model}",
                                                 "Environment": {"MAX_TOTAL_TOKENS": "512"}})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.c7g.xlarge",
            "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="client", EndpointConfigName="c")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="client",
                                                          WaiterConfig={"Delay": 1, "MaxAttempts": 180})
        reply = runtime.invoke_endpoint(EndpointName="client", ContentType="application/json",
                                        Body=json.dumps(GENERATE))
        assert json.loads(reply["Body"].read())[0]["generated_text"]
        running = httpx.get(f"{gateway.url}/pier/copies", timeout=10).json()["copies"]
        assert [c["state"] for c in running] == ["Ready"]
        assert len(copy_actors()) == 1 and len(instance_groups()) == 1

        sagemaker.delete_endpoint(EndpointName="client")
        until(lambda: not copy_actors() and not instance_groups(), timeout=60, what="the copy and instance removed")
    finally:
        gateway.stop(60)
