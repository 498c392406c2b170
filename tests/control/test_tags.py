"""AddTags, ListTags and DeleteTags on models, endpoint configs, endpoints and inference components, through boto3
and the sagemaker SDK (whose Predictor.update_endpoint lists the old endpoint config's tags), and raw JSON 1.1
checked against botocore's output shapes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.control.test_api import ARN, FAST, create_classic, model_dir
from tests.gateway.served import Served

__all__ = ["model_dir"]


def error(call: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(ClientError) as raised:
        call(**kwargs)
    return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]


def test_tags_given_at_create_are_listed_added_overwritten_and_deleted(sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)},
                           Tags=[{"Key": "team", "Value": "search"}, {"Key": "cost-center", "Value": "42"}])
    resource = f"{ARN}:model/m"
    assert sagemaker.list_tags(ResourceArn=resource)["Tags"] == [
        {"Key": "team", "Value": "search"}, {"Key": "cost-center", "Value": "42"}]
    added = sagemaker.add_tags(ResourceArn=resource, Tags=[{"Key": "team", "Value": "ads"}, {"Key": "env",
                                                                                               "Value": ""}])
    assert added["Tags"] == [{"Key": "team", "Value": "ads"}, {"Key": "env", "Value": ""}]
    assert sagemaker.list_tags(ResourceArn=resource)["Tags"] == [
        {"Key": "team", "Value": "ads"}, {"Key": "cost-center", "Value": "42"}, {"Key": "env", "Value": ""}]
    sagemaker.delete_tags(ResourceArn=resource, TagKeys=["team", "not-there"])
    assert sagemaker.list_tags(ResourceArn=resource)["Tags"] == [
        {"Key": "cost-center", "Value": "42"}, {"Key": "env", "Value": ""}]


def test_every_kind_of_resource_has_tags_and_they_go_with_it(sagemaker: Any, model_dir: Path) -> None:
    create_classic(sagemaker, model_dir)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    for resource in (f"{ARN}:model/llm-model", f"{ARN}:endpoint-config/llm-config", f"{ARN}:endpoint/llm"):
        sagemaker.add_tags(ResourceArn=resource, Tags=[{"Key": "k", "Value": resource}])
        assert sagemaker.list_tags(ResourceArn=resource)["Tags"] == [{"Key": "k", "Value": resource}]
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)  # tags left it alone

    sagemaker.delete_model(ModelName="llm-model")
    sagemaker.create_model(ModelName="llm-model", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    assert sagemaker.list_tags(ResourceArn=f"{ARN}:model/llm-model")["Tags"] == []  # a new model: no old tags


def test_an_inference_component_keeps_its_tags_through_updates(sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    sagemaker.create_endpoint_config(EndpointConfigName="h", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="host", EndpointConfigName="h", Tags=[{"Key": "e", "Value": "1"}])
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="host", WaiterConfig=FAST)
    sagemaker.create_inference_component(
        InferenceComponentName="ic", EndpointName="host", VariantName="AllTraffic", RuntimeConfig={"CopyCount": 1},
        Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}},
        Tags=[{"Key": "c", "Value": "1"}])
    sagemaker.update_inference_component_runtime_config(InferenceComponentName="ic",
                                                        DesiredRuntimeConfig={"CopyCount": 2})
    assert sagemaker.list_tags(ResourceArn=f"{ARN}:inference-component/ic")["Tags"] == [{"Key": "c", "Value": "1"}]
    assert sagemaker.list_tags(ResourceArn=f"{ARN}:endpoint/HOST")["Tags"] == [{"Key": "e", "Value": "1"}]


def test_refusals_say_what_is_wrong(sagemaker: Any, model_dir: Path) -> None:
    sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model_dir)})
    assert error(sagemaker.list_tags, ResourceArn=f"{ARN}:endpoint/nope") == (
        "ValidationException", f'Could not find endpoint "{ARN}:endpoint/nope".')
    code, message = error(sagemaker.add_tags, ResourceArn=f"{ARN}:training-job/t", Tags=[{"Key": "k", "Value": "v"}])
    assert code == "ValidationException" and "models, endpoint configs, endpoints and inference components" in message
    code, message = error(sagemaker.add_tags, ResourceArn="m", Tags=[{"Key": "k", "Value": "v"}])
    assert code == "ValidationException" and "arn:aws:sagemaker:REGION:ACCOUNT:" in message
    code, message = error(sagemaker.add_tags, ResourceArn=f"{ARN}:model/m", Tags=[{"Key": "aws:x", "Value": "v"}])
    assert code == "ValidationException" and "aws:" in message
    code, message = error(sagemaker.create_model, ModelName="n", PrimaryContainer={"ModelDataUrl": str(model_dir)},
                          Tags=[{"Key": "bad\nkey", "Value": "v"}])
    assert code == "ValidationException" and "Member must satisfy regular expression pattern" in message
    many = [{"Key": f"k{i}", "Value": "v"} for i in range(30)]
    sagemaker.add_tags(ResourceArn=f"{ARN}:model/m", Tags=many)
    code, message = error(sagemaker.add_tags, ResourceArn=f"{ARN}:model/m",
                          Tags=[{"Key": f"more{i}", "Value": "v"} for i in range(21)])
    assert code == "ValidationException" and "at most 50" in message
    assert len(sagemaker.list_tags(ResourceArn=f"{ARN}:model/m")["Tags"]) == 30  # the refused call added none


def test_answers_match_botocores_output_shapes_and_page(served: Served, model_dir: Path) -> None:
    served.call("CreateModel", {"ModelName": "m", "PrimaryContainer": {"ModelDataUrl": str(model_dir)}})
    resource = "arn:aws:sagemaker:us-east-1:000000000000:model/m"
    tags = [{"Key": f"k{i:02}", "Value": str(i)} for i in range(50)]
    assert served.call("AddTags", {"ResourceArn": resource, "Tags": tags}) == {"Tags": tags}
    first = served.call("ListTags", {"ResourceArn": resource, "MaxResults": 50})
    assert first == {"Tags": tags}
    assert served.call("DeleteTags", {"ResourceArn": resource, "TagKeys": ["k00"]}) == {}


def test_the_sagemaker_sdks_update_endpoint_carries_the_configs_tags(served: Served, sagemaker: Any,
                                                                      model_dir: Path) -> None:
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    import sagemaker as sdk
    from sagemaker.predictor import Predictor

    create_classic(sagemaker, model_dir)
    sagemaker.add_tags(ResourceArn=f"{ARN}:endpoint-config/llm-config", Tags=[{"Key": "team", "Value": "x"}])
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llm", WaiterConfig=FAST)
    session = sdk.Session(boto3.Session(region_name="eu-west-1", aws_access_key_id="pier",
                                        aws_secret_access_key="pier"), sagemaker_client=sagemaker,
                          default_bucket="unused")
    Predictor("llm", sagemaker_session=session).update_endpoint(initial_instance_count=2, instance_type="local",
                                                                wait=False)
    [new] = [c["EndpointConfigArn"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]
             if c["EndpointConfigName"] != "llm-config"]  # the SDK's copy, with two instances, being deployed
    assert {"Key": "team", "Value": "x"} in sagemaker.list_tags(ResourceArn=new)["Tags"]
