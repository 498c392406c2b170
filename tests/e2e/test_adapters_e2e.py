"""Adapter inference components as a SageMaker user meets them: a real `pier up` process, boto3, a base component
of one copy (TINY GGUF, F32) and 8 LoRA adapter components on it, invoked at the same time. Each answer is
llama.cpp's own (llama-cpp-python with lora_path, one sequence) and differs from the base's."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import llama_cpp
import pytest
from botocore.exceptions import ClientError

from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.lora import build_lora_gguf
from tests.e2e.test_gateway_e2e import clients, copies
from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT, BASE = "lora-endpoint", "lora-base"
N_ADAPTERS, N_TOKENS = 8, 12
PROMPT = "the quick brown fox jumps over the lazy dog and then the cat sat on the mat"


class PierUp(ServerProcess):
    """`pier up` as an operator starts it."""

    what = "gateway"

    def __init__(self, state_dir: Path, port: int, log: Path) -> None:
        environment = pier_environment(OMP_WAIT_POLICY="passive")
        super().__init__([sys.executable, "-m", "pier", "up", "--port", str(port), "--state-dir", str(state_dir)],
                         port, log, environment)


def adapter(i: int) -> str:
    return f"lora-{i}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    folder = tmp_path_factory.mktemp("artifacts")
    (folder / "model").mkdir()
    build_gguf(folder / "model" / "model.gguf", TINY, quant="F32")
    folders = []
    for i in range(N_ADAPTERS):
        (folder / adapter(i)).mkdir()
        build_lora_gguf(folder / adapter(i) / "adapter.gguf", TINY, seed=100 + i)
        folders.append(folder / adapter(i))
    return folder / "model", folders


@pytest.fixture(scope="module")
def gateway(files: tuple[Path, list[Path]], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PierUp]:
    folder = tmp_path_factory.mktemp("pier")
    model, adapters = files
    with PierUp(folder / "state", free_port(), folder / "gateway.log") as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        sagemaker.create_model(ModelName="tiny-f32", PrimaryContainer={
            "ModelDataUrl": f"file://{model}", "Environment": {"MAX_TOTAL_TOKENS": "1024", "PIER_PARALLEL": "16"}})
        sagemaker.create_endpoint_config(EndpointConfigName=ENDPOINT, ProductionVariants=[{
            "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=ENDPOINT)
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT,
                                                        WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        sagemaker.create_inference_component(
            InferenceComponentName=BASE, EndpointName=ENDPOINT, VariantName="AllTraffic",
            Specification={"ModelName": "tiny-f32", "ComputeResourceRequirements": {
                "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}}, RuntimeConfig={"CopyCount": 1})
        for i, path in enumerate(adapters):
            sagemaker.create_inference_component(
                InferenceComponentName=adapter(i), EndpointName=ENDPOINT,
                Specification={"BaseInferenceComponentName": BASE, "Container": {"ArtifactUrl": f"file://{path}"}})
        for name in [BASE, *map(adapter, range(N_ADAPTERS))]:
            until(lambda name=name: sagemaker.describe_inference_component(InferenceComponentName=name)[
                "InferenceComponentStatus"] == "InService", timeout=180, what=f"{name} InService")
        yield process


def generate(runtime: Any, component: str) -> str:
    reply = runtime.invoke_endpoint(
        EndpointName=ENDPOINT, InferenceComponentName=component, ContentType="application/json",
        Body=json.dumps({"inputs": PROMPT, "parameters": {
            "max_new_tokens": N_TOKENS, "do_sample": False, "return_full_text": False}}))
    return str(json.loads(reply["Body"].read())[0]["generated_text"])


def reference(model: Path, lora: Path | None) -> str:
    llm = llama_cpp.Llama(str(model / "model.gguf"), lora_path=str(lora / "adapter.gguf") if lora else None,
                          n_ctx=512, n_threads=2, flash_attn=True, verbose=False)
    try:
        out = llm(PROMPT, max_tokens=N_TOKENS, temperature=0.0, top_k=1, repeat_penalty=1.0)
        return str(out["choices"][0]["text"])  # type: ignore[index]
    finally:
        llm.close()


def test_eight_adapters_on_one_copy_at_once_each_answer_llama_cpps_own(
    gateway: PierUp, files: tuple[Path, list[Path]],
) -> None:
    sagemaker, runtime = clients(gateway.url)
    names = [BASE, *map(adapter, range(N_ADAPTERS))]
    assert len(copies(gateway.url, BASE)) == 1
    for _ in range(2):  # the second time every adapter is loaded and every prompt cached, under its own adapter
        with ThreadPoolExecutor(len(names)) as pool:
            answers = dict(zip(names, pool.map(lambda n: generate(runtime, n), names), strict=True))
        model, adapters = files
        expected = {BASE: reference(model, None)} | {adapter(i): reference(model, a) for i, a in enumerate(adapters)}
        assert answers == expected
    assert len(set(answers.values())) == len(names)

    described = sagemaker.describe_inference_component(InferenceComponentName=adapter(0))
    assert described["Specification"]["BaseInferenceComponentName"] == BASE
    assert described["Specification"]["Container"]["ArtifactUrl"] == f"file://{files[1][0]}"
    assert "RuntimeConfig" not in described
    listed = sagemaker.list_inference_components(EndpointNameEquals=ENDPOINT, MaxResults=20)["InferenceComponents"]
    assert {c["InferenceComponentName"] for c in listed} == set(names)

    # memory per adapter: rank 4 over q, v, up and down of TINY's 2 layers, F32 (tests/engine/test_loaded_adapters.py)
    rows = {r["InferenceComponentName"]: r for r in httpx.get(f"{gateway.url}/pier/adapters").json()["adapters"]}
    copy_id = copies(gateway.url, BASE)[0]["copy_id"]
    assert {n: (r["MemoryBytes"], r["LoadedOn"]) for n, r in rows.items()} == {
        adapter(i): (19456, [copy_id]) for i in range(N_ADAPTERS)}


def test_the_base_is_kept_while_adapters_remain_and_an_adapter_is_refused_what_aws_refuses(gateway: PierUp) -> None:
    sagemaker, _ = clients(gateway.url)
    with pytest.raises(ClientError, match="base of adapter inference components") as refused:
        sagemaker.delete_inference_component(InferenceComponentName=BASE)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError, match="is an adapter"):
        sagemaker.update_inference_component_runtime_config(InferenceComponentName=adapter(0),
                                                            DesiredRuntimeConfig={"CopyCount": 2})
    with pytest.raises(ClientError, match="names no inference component"):
        sagemaker.create_inference_component(
            InferenceComponentName="orphan", EndpointName=ENDPOINT,
            Specification={"BaseInferenceComponentName": "nope", "Container": {"ArtifactUrl": "file:///tmp"}})

    sagemaker.delete_inference_component(InferenceComponentName=adapter(N_ADAPTERS - 1))
    until(lambda: adapter(N_ADAPTERS - 1) not in {
        c["InferenceComponentName"] for c in sagemaker.list_inference_components(MaxResults=20)["InferenceComponents"]},
        timeout=30, what="the adapter deleted")
