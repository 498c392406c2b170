"""Adapter inference components in the control plane, over a fake backend: what is accepted and refused, their
statuses, Describe/List/Update/Delete as botocore's shapes say, and the base kept while adapters remain."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from pier.control.adapters import adapter_file, readiness, update_change
from pier.control.records import ComponentRecord, ContainerSpec
from pier.control.shapes import ComponentSpec
from pier.synthetic.builder import TINY, build_gguf
from pier.synthetic.lora import build_lora_gguf
from tests.control.test_api import component_status, create_for_components
from tests.gateway.served import Served, wait_for

RESOURCES = {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("model", "lora", "lora2", "empty", "two", "model-only", "nan", "huge")}
    for folder in made.values():
        folder.mkdir()
    (made["model"] / "model.gguf").write_bytes(b"GGUF" + bytes(1024))
    build_lora_gguf(made["lora"] / "adapter.gguf", TINY, seed=1)
    build_lora_gguf(made["lora2"] / "adapter.gguf", TINY, seed=2)
    build_lora_gguf(made["two"] / "a.gguf", TINY, seed=1)
    build_lora_gguf(made["two"] / "b.gguf", TINY, seed=2)
    build_gguf(made["model-only"] / "model.gguf", TINY, quant="F32")
    build_lora_gguf(made["nan"] / "adapter.gguf", TINY, poison=float("nan"))
    build_lora_gguf(made["huge"] / "adapter.gguf", TINY, gain=1e6)
    return made


def with_base(sagemaker: Any, folders: dict[str, Path]) -> None:
    create_for_components(sagemaker)
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(folders["model"])})
    sagemaker.create_inference_component(InferenceComponentName="base", EndpointName="host", Specification={
        "ModelName": "m", "ComputeResourceRequirements": RESOURCES}, RuntimeConfig={"CopyCount": 1})
    wait_for(lambda: component_status(sagemaker, "base") == "InService")


def adapter_spec(folder: Path, base: str = "base", **extra: Any) -> dict[str, Any]:
    return {"BaseInferenceComponentName": base, "Container": {"ArtifactUrl": f"file://{folder}"}, **extra}


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"BaseInferenceComponentName": "base"}, "needs Container.ArtifactUrl"),
        (adapter_spec(Path("/tmp"), ModelName="m"), "omit ModelName"),
        (adapter_spec(Path("/tmp"), ComputeResourceRequirements=RESOURCES), "ComputeResourceRequirements"),
        (adapter_spec(Path("/tmp"), base="nope"), 'BaseInferenceComponentName "nope" names no inference component'),
        *[({"BaseInferenceComponentName": "base", "Container": {"ArtifactUrl": "file:///tmp", "Environment": {
            "PIER_LORA_SCALE": given}}}, "is not a finite number") for given in ("nan", "inf", "1e30", "x")],
    ],
)
def test_an_adapter_spec_is_refused_saying_what_to_fix(sagemaker: Any, folders: dict[str, Path],
                                                        spec: dict[str, Any], words: str) -> None:
    with_base(sagemaker, folders)
    with pytest.raises(ClientError, match=words) as refused:
        sagemaker.create_inference_component(InferenceComponentName="ad", EndpointName="host", Specification=spec)
    assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_an_adapter_on_its_base_from_create_to_delete(served: Served, sagemaker: Any,
                                                      folders: dict[str, Path]) -> None:
    with_base(sagemaker, folders)
    with pytest.raises(ClientError, match="omit RuntimeConfig"):
        sagemaker.create_inference_component(InferenceComponentName="ad", EndpointName="host",
                                             Specification=adapter_spec(folders["lora"]),
                                             RuntimeConfig={"CopyCount": 1})
    served.call("CreateInferenceComponent", {"InferenceComponentName": "ad", "EndpointName": "host",
                                             "Specification": adapter_spec(folders["lora"])})
    wait_for(lambda: component_status(sagemaker, "ad") == "InService")
    described = served.call("DescribeInferenceComponent", {"InferenceComponentName": "ad"})
    assert described["Specification"]["BaseInferenceComponentName"] == "base"
    assert described["VariantName"] == "AllTraffic" and "RuntimeConfig" not in described
    served.call("ListInferenceComponents", {"EndpointNameEquals": "host"})
    with pytest.raises(ClientError, match="is an adapter"):
        sagemaker.update_inference_component_runtime_config(InferenceComponentName="ad",
                                                            DesiredRuntimeConfig={"CopyCount": 2})
    with pytest.raises(ClientError, match="base of adapter inference components \\(ad\\)"):
        sagemaker.delete_inference_component(InferenceComponentName="base")

    served.call("UpdateInferenceComponent", {"InferenceComponentName": "ad",
                                             "Specification": adapter_spec(folders["lora2"])})
    wait_for(lambda: component_status(sagemaker, "ad") == "InService")
    assert sagemaker.describe_inference_component(InferenceComponentName="ad")["Specification"]["Container"][
        "ArtifactUrl"] == f"file://{folders['lora2']}"

    sagemaker.delete_inference_component(InferenceComponentName="ad")
    wait_for(lambda: not sagemaker.list_inference_components(NameContains="ad")["InferenceComponents"])
    sagemaker.delete_inference_component(InferenceComponentName="base")
    wait_for(lambda: not sagemaker.list_inference_components()["InferenceComponents"])


@pytest.mark.parametrize(("folder", "reason"), [
    ("empty", "holds no .gguf file"), ("two", "holds 2 .gguf files"), ("model-only", "not a LoRA adapter"),
    ("nan", "holds NaN or infinite weights"), ("huge", "holds weights up to"),
])
def test_an_artifact_without_one_lora_gguf_fails_the_adapter_with_why(sagemaker: Any, folders: dict[str, Path],
                                                                      folder: str, reason: str) -> None:
    with_base(sagemaker, folders)
    sagemaker.create_inference_component(InferenceComponentName="ad", EndpointName="host",
                                         Specification=adapter_spec(folders[folder]))
    wait_for(lambda: component_status(sagemaker, "ad") == "Failed")
    assert reason in sagemaker.describe_inference_component(InferenceComponentName="ad")["FailureReason"]
    with pytest.raises(ValueError, match=reason):
        adapter_file(str(folders[folder]))


def test_an_adapter_being_updated_serves_its_old_artifact_until_the_new_one_is_fetched(
    folders: dict[str, Path],
) -> None:
    """UpdateInferenceComponent with another ArtifactUrl forgot the fetched folder at once, so every invocation
    until the new fetch ended was refused ("is Updating: invoke it once ... InService"); SageMaker keeps serving
    a component while it updates. The old folder is kept, and only the new one's fetch makes it ready."""
    def record(spec: dict[str, Any], **fields: Any) -> ComponentRecord:
        return ComponentRecord(name="ad", arn="a", created=1.0, modified=1.0, endpoint="host", variant="v",
                               specification=ComponentSpec.model_validate(spec), container=ContainerSpec(), copies=0,
                               **fields)

    base = record({"ModelName": "m", "ComputeResourceRequirements": RESOURCES}, status="InService")
    serving = record(adapter_spec(folders["lora"]), status="InService", model_dir=str(folders["lora"]), weights_mb=0)
    change = update_change(serving, ComponentSpec.model_validate(adapter_spec(folders["lora2"])))
    updating = serving.model_copy(update={**change, "status": "Updating"})
    assert updating.model_dir == str(folders["lora"])  # what invocations use meanwhile (adapter_files)
    assert readiness(updating, base) == (False, "")  # InService only once the new artifact is fetched


def test_an_adapter_made_for_another_model_fails_before_it_serves(tmp_path: Path) -> None:
    """llama.cpp refuses such an adapter at every invocation (424 each time); it fails at readiness instead, saying
    why. An adapter of the base's own shape is ready."""
    base_dir, ours, theirs = tmp_path / "base", tmp_path / "ours", tmp_path / "theirs"
    for folder in (base_dir, ours, theirs):
        folder.mkdir()
    build_gguf(base_dir / "model.gguf", TINY, quant="F32")
    build_lora_gguf(ours / "adapter.gguf", TINY)
    build_lora_gguf(theirs / "adapter.gguf", dataclasses.replace(TINY, n_embd=128, n_ff=256))

    def adapter(folder: Path) -> ComponentRecord:
        return ComponentRecord(name="ad", arn="a", created=1.0, modified=1.0, endpoint="host", variant="v",
                               specification=ComponentSpec.model_validate(adapter_spec(folder)),
                               container=ContainerSpec(), copies=0, model_dir=str(folder), weights_mb=0)

    base = ComponentRecord(name="base", arn="b", created=1.0, modified=1.0, endpoint="host", variant="v",
                           specification=ComponentSpec.model_validate({"ModelName": "m",
                                                                       "ComputeResourceRequirements": RESOURCES}),
                           container=ContainerSpec(), copies=1, status="InService", model_dir=str(base_dir))
    assert readiness(adapter(ours), base) == (True, "")
    ready, problem = readiness(adapter(theirs), base)
    assert not ready and "was made for another model" in problem and "128 inputs" in problem
    assert "model.gguf's 64" in problem
