from __future__ import annotations

from typing import Any

import pytest

from pier.control.errors import ValidationError
from pier.control.shapes import (
    CreateEndpointConfigInput,
    CreateInferenceComponentInput,
    CreateModelInput,
    EndpointNameInput,
    ModelNameInput,
)
from pier.control.validation_message import parse


@pytest.mark.parametrize(("name", "ok"), [
    ("a", True), ("my-endpoint", True), ("a--b", True), ("A1", True), ("x" * 63, True),
    ("x" * 64, False), ("-a", False), ("a-", False), ("a_b", False), ("a.b", False), ("", False),
])
def test_endpoint_names(name: str, ok: bool) -> None:
    if ok:
        parse(EndpointNameInput, {"EndpointName": name})
    else:
        with pytest.raises(ValidationError, match="at 'endpointName' failed to satisfy constraint"):
            parse(EndpointNameInput, {"EndpointName": name})


@pytest.mark.parametrize(("name", "ok"), [
    ("m", True), ("my-model-1", True), ("a--b", True), ("-m", False), ("m-", False), ("m_1", False),
])
def test_model_names(name: str, ok: bool) -> None:
    if ok:
        parse(ModelNameInput, {"ModelName": name})
    else:
        with pytest.raises(ValidationError, match=r"regular expression pattern: \^\[a-zA-Z0-9\]"):
            parse(ModelNameInput, {"ModelName": name})


@pytest.mark.parametrize(("shape", "body", "message"), [
    (EndpointNameInput, {}, "1 validation error detected: Value null at 'endpointName' failed to satisfy "
                            "constraint: Member must not be null"),
    (CreateEndpointConfigInput, {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 0}]},
     "Value '0' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must "
     "have value greater than or equal to 1"),
    (CreateEndpointConfigInput, {"EndpointConfigName": "c", "ProductionVariants": [{"VariantName": "v"}]},
     "Variant 'v' needs InstanceType (e.g. 'local' or 'ml.c7g.xlarge') and InitialInstanceCount"),
    (CreateEndpointConfigInput, {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "v", "ServerlessConfig": {"MemorySizeInMB": 2048, "MaxConcurrency": 1}}]},
     "pier has no serverless endpoints"),
    (CreateEndpointConfigInput, {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 1},
        {"VariantName": "v", "InstanceType": "local", "InitialInstanceCount": 1}]},
     "Variant names must be unique"),
    (CreateEndpointConfigInput, {"EndpointConfigName": "c", "ProductionVariants": [
        {"VariantName": "a", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1},
        {"VariantName": "b", "InstanceType": "local", "InitialInstanceCount": 1}]},
     "this config mixes both"),
    (CreateModelInput, {"ModelName": "m", "Containers": [{}, {}]}, "not an inference pipeline"),
    (CreateInferenceComponentInput, {"InferenceComponentName": "ic", "EndpointName": "e",
                                     "Specification": {"ModelName": "m"}},
     "Specification needs ComputeResourceRequirements"),
    (CreateInferenceComponentInput, {"InferenceComponentName": "ic", "EndpointName": "e", "Specification": {
        "ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 64}}},
     "at 'specification.computeResourceRequirements.minMemoryRequiredInMb'"),
])
def test_messages_read_like_aws_and_say_how_to_fix(shape: Any, body: dict, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse(shape, body)
    assert message in raised.value.message


def test_unmodelled_fields_are_kept_for_describe() -> None:
    request = parse(CreateModelInput, {"ModelName": "m",
                                       "PrimaryContainer": {"ModelDataUrl": "/m", "ContainerHostname": "x"},
                                       "ExecutionRoleArn": "arn:role", "EnableNetworkIsolation": False})
    assert request.wire() == {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": "/m", "ContainerHostname": "x",
                                                                     "Environment": {}},
                              "ExecutionRoleArn": "arn:role", "EnableNetworkIsolation": False}


def test_sagemaker_sdk_resource_requirements_become_these_fields() -> None:
    # ResourceRequirements(requests={"copies": 8, "num_accelerators": 1, "num_cpus": 10, "memory": 102400})
    request = parse(CreateInferenceComponentInput, {
        "InferenceComponentName": "ic", "EndpointName": "e", "VariantName": "AllTraffic",
        "Specification": {"ModelName": "m", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 10, "NumberOfAcceleratorDevicesRequired": 1,
            "MinMemoryRequiredInMb": 102400}},
        "RuntimeConfig": {"CopyCount": 8}})
    assert request.RuntimeConfig.CopyCount == 8
    assert request.Specification.resources.NumberOfCpuCoresRequired == 10
