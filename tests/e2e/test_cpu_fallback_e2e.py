"""A GPU request on a host without GPUs, as a new user meets it: a gateway process, boto3, and an inference
component asking for NumberOfAcceleratorDevicesRequired on an ml.g5.12xlarge variant. Refused, naming GPUs; with
`--cpu-fallback`, served by a real copy on CPU that says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

NO_GPUS = {"PIER_FAKE_GPUS": "0"}  # none, even on a host that has some


def clients(url: str) -> tuple[Any, Any]:
    settings = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x",
                "aws_secret_access_key": "x"}
    return boto3.client("sagemaker", **settings), boto3.client("sagemaker-runtime", **settings)


def ask_for_a_gpu(sagemaker: Any, model: Path) -> None:
    sagemaker.create_model(ModelName="llama-tiny", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"ModelDataUrl": f"file://{model}"})
    sagemaker.create_endpoint_config(EndpointConfigName="g5", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.g5.12xlarge", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="llm", EndpointConfigName="g5")
    sagemaker.create_inference_component(
        InferenceComponentName="llama-ic", EndpointName="llm", VariantName="AllTraffic",
        Specification={"ModelName": "llama-tiny", "ComputeResourceRequirements": {
            "NumberOfAcceleratorDevicesRequired": 1, "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 512}},
        RuntimeConfig={"CopyCount": 1})


def component(sagemaker: Any) -> dict[str, Any]:
    described: dict[str, Any] = sagemaker.describe_inference_component(InferenceComponentName="llama-ic")
    return described


def test_a_gpu_request_is_refused_naming_gpus(tiny_gguf: Path, tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log", NO_GPUS) as gateway:
        sagemaker, _ = clients(gateway.wait_ready().url)
        ask_for_a_gpu(sagemaker, tiny_gguf)
        described = until(lambda: (d := component(sagemaker))["InferenceComponentStatus"] == "Failed" and d,
                          what="the component to fail")
        assert "each copy needs 1 GPU of its own and this host has no GPUs" in described["FailureReason"]
        assert "pier up --cpu-fallback" in described["FailureReason"]
        assert httpx.get(f"{gateway.url}/pier/copies").json()["copies"] == []  # nothing runs silently on CPU


def test_with_cpu_fallback_it_serves_on_cpu_and_says_so(tiny_gguf: Path, tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log", NO_GPUS,
                        ("--cpu-fallback",)) as gateway:
        sagemaker, runtime = clients(gateway.wait_ready().url)
        ask_for_a_gpu(sagemaker, tiny_gguf)
        until(lambda: component(sagemaker)["InferenceComponentStatus"] == "InService", what="the component in service")
        reply = runtime.invoke_endpoint(EndpointName="llm", InferenceComponentName="llama-ic",
                                        ContentType="application/json",
                                        Body=json.dumps({"inputs": "the cat", "parameters": {"max_new_tokens": 4}}))
        assert json.loads(reply["Body"].read())[0]["generated_text"]
        [copy] = httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
        assert (copy["device"], copy["gpus"], copy["accelerators"], copy["cpu_fallback"]) == ("cpu", [], 1, True)
        host = httpx.get(f"{gateway.url}/pier/gpus").json()
        assert (host["count"], host["cpu_fallback"]) == (0, True)
        log = gateway.output()
        assert "GPUs for copies: no GPUs (PIER_FAKE_GPUS); copies asking for GPUs it lacks run on CPU" in log
        assert "on CPU: it asks for 1 GPU(s) this host lacks (--cpu-fallback)" in log


def _real_gpus() -> bool:
    from pier.engine.devices import gpu_offload_supported, gpus
    from pier.gpus import discover

    return bool(discover({}).gpus) and gpu_offload_supported() and bool(gpus())


@pytest.mark.skipif(not _real_gpus(), reason="needs a GPU and a GPU build of llama.cpp (benchmarks/gpu_device.sh)")
def test_on_a_gpu_host_the_copy_holds_a_gpu_and_computes_on_it(tiny_gguf: Path, tmp_path: Path) -> None:
    with GatewayProcess(tmp_path / "state", free_port(), tmp_path / "gateway.log") as gateway:
        sagemaker, runtime = clients(gateway.wait_ready().url)
        ask_for_a_gpu(sagemaker, tiny_gguf)
        until(lambda: component(sagemaker)["InferenceComponentStatus"] == "InService", what="the component in service",
              timeout=120)
        reply = runtime.invoke_endpoint(EndpointName="llm", InferenceComponentName="llama-ic",
                                        ContentType="application/json",
                                        Body=json.dumps({"inputs": "the cat", "parameters": {"max_new_tokens": 4}}))
        assert json.loads(reply["Body"].read())[0]["generated_text"]
        [copy] = httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
        assert copy["device"] != "cpu" and len(copy["gpus"]) == 1 and not copy["cpu_fallback"]
        logs = httpx.get(f"{gateway.url}/pier/copies/{copy['copy_id']}/logs").text
        assert " on CUDA0 (" in logs  # the engine says where its layers went
