"""pier's own routes about GPUs: /pier/gpus (this host's, and which copy holds each) and the device of each copy
in /pier/copies, over a gateway whose backend runs nothing, with a fake inventory of 4 GPUs or none."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from pier.gpus import GpuInventory, fake
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.sockets import serving
from tests.waiting import until


@contextmanager
def gateway(tmp_path: Path, gpus: GpuInventory, cpu_fallback: bool = False) -> Iterator[str]:
    app = create_gateway(tmp_path / "state", backend=FakeBackend(), tick_s=0.05, gpus=gpus,
                         settings=GatewaySettings(cpu_fallback=cpu_fallback))
    with serving(app, lifespan="on") as url:
        yield url


def component(url: str, tmp_path: Path, copies: int) -> Any:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "model.gguf").write_bytes(b"GGUF")
    sagemaker = sagemaker_client(url)
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
    sagemaker.create_inference_component(InferenceComponentName="ic", EndpointName="e", VariantName="AllTraffic",
                                         Specification={"ModelName": "m", "ComputeResourceRequirements": {
                                             "NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 256}},
                                         RuntimeConfig={"CopyCount": copies})
    return sagemaker


def rows(url: str) -> list[dict[str, Any]]:
    return httpx.get(url + "/pier/copies").json()["copies"]


def test_copies_show_their_gpus_and_the_host_which_copy_holds_each(tmp_path: Path) -> None:
    with gateway(tmp_path, fake(4)) as url:
        component(url, tmp_path, 3)
        until(lambda: len(rows(url)) == 3, what="three copies")
        copies = rows(url)
        assert sorted(tuple(r["gpus"]) for r in copies) == [("0",), ("1",), ("2",)]
        assert {(r["device"], r["accelerators"], r["cpu_fallback"]) for r in copies} == {("gpu", 1, False)}
        host = httpx.get(url + "/pier/gpus").json()
        assert (host["count"], host["source"], host["cpu_fallback"]) == (4, "PIER_FAKE_GPUS", False)
        holders = {str(g["id"]): g["copy_id"] for g in host["gpus"]}
        assert holders == {**{r["gpus"][0]: r["copy_id"] for r in copies}, "3": None}


def test_without_gpus_the_component_fails_naming_gpus(tmp_path: Path) -> None:
    with gateway(tmp_path, GpuInventory()) as url:
        sagemaker = component(url, tmp_path, 1)
        described = until(lambda: (d := sagemaker.describe_inference_component(InferenceComponentName="ic"))[
            "InferenceComponentStatus"] == "Failed" and d, what="the component to fail")
        assert "each copy needs 1 GPU of its own and this host has no GPUs" in described["FailureReason"]
        assert rows(url) == [] and httpx.get(url + "/pier/gpus").json()["count"] == 0


def test_with_cpu_fallback_the_copies_say_they_run_on_cpu(tmp_path: Path) -> None:
    with gateway(tmp_path, GpuInventory(), cpu_fallback=True) as url:
        sagemaker = component(url, tmp_path, 2)
        until(lambda: sagemaker.describe_inference_component(InferenceComponentName="ic")[
            "InferenceComponentStatus"] == "InService", what="the component in service")
        assert {(r["device"], tuple(r["gpus"]), r["cpu_fallback"]) for r in rows(url)} == {("cpu", (), True)}
        assert httpx.get(url + "/pier/gpus").json()["cpu_fallback"] is True


def test_a_transform_job_that_does_not_exist_is_a_404_in_pier_s_shape(tmp_path: Path) -> None:
    """{"message": ...} as pier's other routes answer (GET /pier/copies/ID/logs), naming what lists the jobs."""
    with gateway(tmp_path, fake(0)) as url:
        reply = httpx.get(url + "/pier/transform-jobs/nope")
        assert reply.status_code == 404 and set(reply.json()) == {"message"}, reply.text
        assert "pier transforms lists them" in reply.json()["message"]
        assert httpx.get(url + "/pier/transform-jobs").json() == {"jobs": []}
