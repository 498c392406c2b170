"""The control plane through boto3 (and raw JSON 1.1, checked against botocore's output shapes), over a
fake backend: statuses, waiters, error shapes, copies and their cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError, WaiterError

from pier.control.instance_types import host_cores
from tests.control.fakes import FakeBackend
from tests.gateway.served import Served, sagemaker_client, serving, wait_for

FAST = {"Delay": 0.05, "MaxAttempts": 200}
ARN = "arn:aws:sagemaker:eu-west-1:000000000000"


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.gguf").write_bytes(b"GGUF" + bytes(1024))
    return folder


def create_classic(client: Any, model_dir: Path, name: str = "llm", count: int = 1) -> None:
    client.create_model(ModelName=f"{name}-model", PrimaryContainer={
        "Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1",
        "ModelDataUrl": str(model_dir), "Environment": {"MAX_TOTAL_TOKENS": "512"}})
    client.create_endpoint_config(EndpointConfigName=f"{name}-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": f"{name}-model", "InstanceType": "local",
        "InitialInstanceCount": count}])
    client.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")


def create_for_components(client: Any, name: str = "host", instance_type: str = "local") -> None:
    client.create_endpoint_config(EndpointConfigName=f"{name}-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": instance_type, "InitialInstanceCount": 1}])
    client.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")
    client.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=FAST)


def component_status(client: Any, name: str) -> str:
    return client.describe_inference_component(InferenceComponentName=name)["InferenceComponentStatus"]


def test_classic_endpoint_from_create_to_delete_with_boto3_waiters(served: Served, sagemaker: Any,
                                                                    model_dir: Path) -> None:
    create_classic(sagemaker, model_dir)
    assert sagemaker.describe_endpoint(EndpointName="llm")["EndpointStatus"] in ("Creating", "InService")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)

    described = sagemaker.describe_endpoint(EndpointName="llm")
    assert described["EndpointArn"] == f"{ARN}:endpoint/llm"
    assert described["EndpointConfigName"] == "llm-config"
    [variant] = described["ProductionVariants"]
    assert (variant["VariantName"], variant["CurrentInstanceCount"], variant["DesiredInstanceCount"]) == (
        "AllTraffic", 1, 1)
    assert variant["DeployedImages"][0]["SpecifiedImage"].endswith("tgi-inference:2.1")
    [spec] = served.backend.specs.values()
    assert spec.component == "llm/AllTraffic"
    assert spec.model_dir == model_dir.resolve()
    assert spec.environment == {"MAX_TOTAL_TOKENS": "512"}
    assert spec.cores == host_cores()  # `local` is this host: the one copy gets every core

    sagemaker.delete_endpoint(EndpointName="llm")
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName="llm", WaiterConfig=FAST)
    assert served.backend.copies == {}
    assert sagemaker.list_endpoints()["Endpoints"] == []


def test_errors_carry_sagemakers_types_and_words(sagemaker: Any, model_dir: Path) -> None:
    create_classic(sagemaker, model_dir)

    def error(call: Any, **kwargs: Any) -> tuple[str, str]:
        with pytest.raises(ClientError) as raised:
            call(**kwargs)
        return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]

    assert error(sagemaker.create_endpoint, EndpointName="LLM", EndpointConfigName="llm-config") == (
        "ValidationException", f'Cannot create already existing endpoint "{ARN}:endpoint/llm".')
    assert error(sagemaker.create_model, ModelName="llm-model", PrimaryContainer={"ModelDataUrl": "/x"}) == (
        "ValidationException", f'Cannot create already existing model "{ARN}:model/llm-model".')
    assert error(sagemaker.describe_endpoint, EndpointName="nope") == (
        "ValidationException", 'Could not find endpoint "nope".')
    assert error(sagemaker.describe_endpoint_config, EndpointConfigName="nope") == (
        "ValidationException", 'Could not find endpoint configuration "nope".')
    assert error(sagemaker.describe_model, ModelName="nope") == (
        "ValidationException", f'Could not find model "{ARN}:model/nope".')
    assert error(sagemaker.describe_inference_component, InferenceComponentName="nope") == (
        "ValidationException", 'Could not find inference component "nope".')
    code, message = error(sagemaker.create_endpoint, EndpointName="bad_name", EndpointConfigName="llm-config")
    assert code == "ValidationException"
    assert "Value 'bad_name' at 'endpointName' failed to satisfy constraint" in message
    assert "Use letters, digits and hyphens" in message
    code, message = error(sagemaker.create_endpoint_config, EndpointConfigName="c", ProductionVariants=[{
        "VariantName": "v", "ModelName": "llm-model", "InstanceType": "ml.z9.huge", "InitialInstanceCount": 1}])
    assert "Unknown InstanceType 'ml.z9.huge'" in message
    code, message = error(sagemaker.create_model, ModelName="empty", PrimaryContainer={"Image": "x"})
    assert "set PrimaryContainer.ModelDataUrl" in message

    with pytest.raises(WaiterError, match="ValidationException"):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="nope", WaiterConfig=FAST)


def test_unknown_operation_and_bad_json(served: Served) -> None:
    reply = httpx.post(served.url, content=b"{", headers={"X-Amz-Target": "SageMaker.ListModels"})
    assert (reply.status_code, reply.json()["__type"]) == (400, "SerializationException")
    reply = httpx.post(served.url, json={}, headers={"X-Amz-Target": "SageMaker.CreateTrainingJob"})
    assert reply.json()["__type"] == "UnknownOperationException"
    assert "CreateTrainingJob" in reply.json()["message"]


def test_every_answer_matches_botocores_output_shapes(served: Served, model_dir: Path) -> None:
    container = {"ModelDataUrl": str(model_dir), "Environment": {"A": "1"}}
    served.call("CreateModel", {"ModelName": "m", "PrimaryContainer": container, "ExecutionRoleArn": "arn:x"})
    served.call("DescribeModel", {"ModelName": "m"})
    served.call("ListModels")
    served.call("CreateEndpointConfig", {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}]})
    served.call("DescribeEndpointConfig", {"EndpointConfigName": "c"})
    served.call("ListEndpointConfigs")
    served.call("CreateEndpoint", {"EndpointName": "e", "EndpointConfigName": "c"})
    wait_for(lambda: served.call("DescribeEndpoint", {"EndpointName": "e"})["EndpointStatus"] == "InService")
    served.call("ListEndpoints", {"StatusEquals": "InService"})
    served.call("CreateInferenceComponent", {
        "InferenceComponentName": "ic", "EndpointName": "e", "VariantName": "AllTraffic",
        "Specification": {"ModelName": "m", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}},
        "RuntimeConfig": {"CopyCount": 1}})
    wait_for(lambda: served.call("DescribeInferenceComponent", {"InferenceComponentName": "ic"})[
        "InferenceComponentStatus"] == "InService")
    served.call("ListInferenceComponents", {"EndpointNameEquals": "e"})
    served.call("UpdateInferenceComponentRuntimeConfig",
                {"InferenceComponentName": "ic", "DesiredRuntimeConfig": {"CopyCount": 2}})
    wait_for(lambda: served.call("DescribeInferenceComponent", {"InferenceComponentName": "ic"})[
        "InferenceComponentStatus"] == "InService")
    served.call("UpdateInferenceComponent", {"InferenceComponentName": "ic", "RuntimeConfig": {"CopyCount": 1}})
    served.call("UpdateEndpointWeightsAndCapacities", {"EndpointName": "e", "DesiredWeightsAndCapacities": [
        {"VariantName": "AllTraffic", "DesiredInstanceCount": 2}]})
    served.call("DeleteInferenceComponent", {"InferenceComponentName": "ic"})
    served.call("DeleteEndpoint", {"EndpointName": "e"})
    served.call("DeleteEndpointConfig", {"EndpointConfigName": "c"})
    served.call("DeleteModel", {"ModelName": "m"})


def test_inference_component_copies_get_their_own_cores_and_scale(served: Served, sagemaker: Any,
                                                                   model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    create_for_components(sagemaker, instance_type="ml.c7g.xlarge")
    sagemaker.create_inference_component(
        InferenceComponentName="ic", EndpointName="host", VariantName="AllTraffic",
        Specification={"ModelName": "m", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 2, "MinMemoryRequiredInMb": 1024}},
        RuntimeConfig={"CopyCount": 2})
    wait_for(lambda: component_status(sagemaker, "ic") == "InService")
    described = sagemaker.describe_inference_component(InferenceComponentName="ic")
    assert described["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}
    assert described["EndpointArn"] == f"{ARN}:endpoint/host"
    assert described["Specification"]["ComputeResourceRequirements"]["NumberOfCpuCoresRequired"] == 2
    specs = sorted(served.backend.specs.values(), key=lambda s: s.copy_id)
    host = host_cores()
    # ml.c7g.xlarge has 4 vCPUs: copy 0 owns vCPUs 0-1, copy 1 vCPUs 2-3, each mapped onto this host's cores.
    assert [s.cores for s in specs] == [tuple(sorted({host[v % len(host)] for v in vcpus}))
                                        for vcpus in ((0, 1), (2, 3))]
    assert all(s.memory_mb == 1024 and s.component == "ic" for s in specs)

    sagemaker.update_inference_component_runtime_config(InferenceComponentName="ic",
                                                        DesiredRuntimeConfig={"CopyCount": 1})
    wait_for(lambda: component_status(sagemaker, "ic") == "InService" and len(served.backend.copies) == 1)
    assert sagemaker.describe_inference_component(InferenceComponentName="ic")["RuntimeConfig"][
        "CurrentCopyCount"] == 1

    with pytest.raises(ClientError) as in_use:
        sagemaker.delete_endpoint(EndpointName="host")
    assert in_use.value.response["Error"]["Code"] == "ResourceInUse"
    assert "delete them" in in_use.value.response["Error"]["Message"]

    sagemaker.delete_inference_component(InferenceComponentName="ic")
    wait_for(lambda: not sagemaker.list_inference_components()["InferenceComponents"])
    assert served.backend.copies == {}
    sagemaker.delete_endpoint(EndpointName="host")
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName="host", WaiterConfig=FAST)


def test_too_little_capacity_fails_the_component_with_what_is_missing(sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    create_for_components(sagemaker, instance_type="ml.c7g.large")  # 2 vCPUs, 4 GiB
    sagemaker.create_inference_component(
        InferenceComponentName="ic", EndpointName="host",
        Specification={"ModelName": "m", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 512}},
        RuntimeConfig={"CopyCount": 3})
    wait_for(lambda: component_status(sagemaker, "ic") == "Failed")
    described = sagemaker.describe_inference_component(InferenceComponentName="ic")
    assert "1 of 3 copies not placed" in described["FailureReason"]
    assert "1 CPU cores (at most 0 free on an instance)" in described["FailureReason"]
    assert described["RuntimeConfig"]["CurrentCopyCount"] == 2  # the copies that fit still serve

    # Scaling down to what fits heals it.
    sagemaker.update_inference_component_runtime_config(InferenceComponentName="ic",
                                                        DesiredRuntimeConfig={"CopyCount": 2})
    wait_for(lambda: component_status(sagemaker, "ic") == "InService")


def test_a_copy_bigger_than_an_instance_is_refused_at_once(sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    create_for_components(sagemaker, instance_type="ml.c7g.large")  # 2 vCPUs, 4 GiB
    with pytest.raises(sagemaker.exceptions.ResourceLimitExceeded, match="needs 4 CPU cores, more than a whole"):
        sagemaker.create_inference_component(
            InferenceComponentName="ic", EndpointName="host",
            Specification={"ModelName": "m", "ComputeResourceRequirements": {
                "NumberOfCpuCoresRequired": 4, "MinMemoryRequiredInMb": 512}},
            RuntimeConfig={"CopyCount": 1})


def test_model_that_cannot_be_fetched_fails_the_endpoint_with_the_reason(sagemaker: Any, tmp_path: Path) -> None:
    create_classic(sagemaker, tmp_path / "missing")
    with pytest.raises(WaiterError) as failed:
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    assert "Failed" in str(failed.value)
    reason = sagemaker.describe_endpoint(EndpointName="llm")["FailureReason"]
    assert f"No model at {tmp_path / 'missing'}" in reason


def test_instance_count_and_endpoint_config_updates(served: Served, sagemaker: Any, model_dir: Path,
                                                    tmp_path: Path) -> None:
    create_classic(sagemaker, model_dir)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    served.backend.auto_ready = False  # the new copy stays loading until the test says otherwise
    sagemaker.update_endpoint_weights_and_capacities(EndpointName="llm", DesiredWeightsAndCapacities=[
        {"VariantName": "AllTraffic", "DesiredInstanceCount": 2}])
    wait_for(lambda: len(served.backend.copies) == 2)
    assert sagemaker.describe_endpoint(EndpointName="llm")["EndpointStatus"] == "Updating"
    with pytest.raises(ClientError, match="Cannot update in-progress endpoint"):
        sagemaker.update_endpoint(EndpointName="llm", EndpointConfigName="llm-config")
    served.backend.ready_all()
    served.backend.auto_ready = True
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    assert len(served.backend.copies) == 2
    assert sagemaker.describe_endpoint(EndpointName="llm")["ProductionVariants"][0]["CurrentInstanceCount"] == 2

    other = tmp_path / "other"
    other.mkdir()
    (other / "other.gguf").write_bytes(b"GGUF")
    sagemaker.create_model(ModelName="other", PrimaryContainer={"ModelDataUrl": str(other)})
    sagemaker.create_endpoint_config(EndpointConfigName="other-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "other", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.update_endpoint(EndpointName="llm", EndpointConfigName="other-config")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    wait_for(lambda: [s.model_dir for s in served.backend.specs.values()] == [other.resolve()])
    assert sagemaker.describe_endpoint(EndpointName="llm")["EndpointConfigName"] == "other-config"


def test_a_restarted_gateway_brings_back_every_endpoint(tmp_path: Path, model_dir: Path) -> None:
    from pier.gateway.app import create_gateway

    first = FakeBackend()
    with serving(create_gateway(tmp_path / "state", backend=first, tick_s=0.05), lifespan="on") as url:
        client = sagemaker_client(url)
        create_classic(client, model_dir)
        client.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
        create_for_components(client)
        client.create_inference_component(InferenceComponentName="ic", EndpointName="host", Specification={
            "ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}},
            RuntimeConfig={"CopyCount": 2})
        client.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
        wait_for(lambda: component_status(client, "ic") == "InService")
        before = sorted(first.copies)
    assert first.closed

    second = FakeBackend(auto_ready=False)
    with serving(create_gateway(tmp_path / "state", backend=second, tick_s=0.05), lifespan="on") as url:
        client = sagemaker_client(url)
        wait_for(lambda: sorted(second.copies) == before)  # the same copies, by the same ids
        assert client.describe_endpoint(EndpointName="llm")["EndpointStatus"] == "InService"
        assert component_status(client, "ic") == "InService"
        assert {e["EndpointName"] for e in client.list_endpoints()["Endpoints"]} == {"llm", "host"}


def test_weights_and_capacities_refuses_an_entry_that_changes_nothing_or_names_a_variant_twice(
        sagemaker: Any, model_dir: Path) -> None:
    """Each DesiredWeightAndCapacity must ask for a weight or an instance count; a variant named twice would have
    its last entry win silently. Both are refused before anything changes, and the endpoint stays InService."""
    create_classic(sagemaker, model_dir)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    with pytest.raises(ClientError, match="DesiredWeight or DesiredInstanceCount") as nothing:
        sagemaker.update_endpoint_weights_and_capacities(EndpointName="llm", DesiredWeightsAndCapacities=[
            {"VariantName": "AllTraffic"}])
    assert nothing.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError, match="more than once") as twice:
        sagemaker.update_endpoint_weights_and_capacities(EndpointName="llm", DesiredWeightsAndCapacities=[
            {"VariantName": "AllTraffic", "DesiredWeight": 1}, {"VariantName": "AllTraffic", "DesiredWeight": 5}])
    assert twice.value.response["Error"]["Code"] == "ValidationException"
    described = sagemaker.describe_endpoint(EndpointName="llm")
    assert described["EndpointStatus"] == "InService"
    assert described["ProductionVariants"][0]["DesiredWeight"] == 1.0
