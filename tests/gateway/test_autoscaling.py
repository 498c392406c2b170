"""Autoscaling at the gateway, driven with boto3's `application-autoscaling`, `cloudwatch`, `sagemaker` and
`sagemaker-runtime` clients: AWS's documented snippets run unchanged, copies follow the load (fake backend whose
copies answer through a real HTTP server), a component at zero copies wakes for a request, and the AWS/SageMaker
metrics are served by CloudWatch's operations and at /metrics."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import botocore
import botocore.session
import cbor2
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from fastapi import FastAPI, Request
from starlette.responses import Response

from pier.autoscaling.settings import ScalingSettings
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from tests.control.fakes import ServingBackend
from tests.gateway.served import Served, sagemaker_client, wait_for
from tests.sockets import serving

FAST = {"Delay": 0.05, "MaxAttempts": 200}
SCALING = ScalingSettings(interval_s=0.1, window_s=2.0, high_resolution_window_s=1.0)


def copy_app() -> FastAPI:
    """What every fake copy answers with: the body back, after `sleep` seconds when the body asks for it."""
    app = FastAPI()

    @app.post("/invocations", response_model=None)
    async def invocations(request: Request) -> Response:
        body = await request.body()
        await asyncio.sleep(float(json.loads(body).get("sleep", 0)))
        return Response(body, media_type="application/json")

    return app


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("autoscaling")
    with serving(copy_app()) as copy_url:
        backend = ServingBackend(copy_url)
        # PIER_MAX_COPIES_PER_HOST=64: the fake copies cost nothing; the tests make many
        settings = GatewaySettings(scaling=SCALING, max_copies_per_host=64)
        app = create_gateway(folder / "state", backend=backend, tick_s=0.05, settings=settings)
        with serving(app, lifespan="on") as url:
            _deploy(sagemaker_client(url), folder)
            yield Served(url, backend, folder / "state")


def _deploy(sagemaker: Any, folder: Path) -> None:
    model = folder / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF" + bytes(1024))
    sagemaker.create_model(ModelName="m", PrimaryContainer={"Image": "pier", "ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName="host", ProductionVariants=[
        {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="host", EndpointConfigName="host")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="host", WaiterConfig=FAST)


def component(served: Served, name: str, copies: int = 1) -> None:
    sagemaker_client(served.url).create_inference_component(
        InferenceComponentName=name, EndpointName="host", VariantName="AllTraffic",
        Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}},
        RuntimeConfig={"CopyCount": copies})
    wait_for(lambda: copy_count(served, name) == (copies, copies))


def client(served: Served, service: str) -> Any:
    return boto3.client(service, endpoint_url=served.url, region_name="us-east-1", aws_access_key_id="pier",
                        aws_secret_access_key="pier", config=Config(retries={"total_max_attempts": 1}))


def copy_count(served: Served, name: str) -> tuple[int, int]:
    """(desired, current) copies, as DescribeInferenceComponent says."""
    config = sagemaker_client(served.url).describe_inference_component(InferenceComponentName=name)["RuntimeConfig"]
    return config["DesiredCopyCount"], config["CurrentCopyCount"]


def invoke(served: Served, name: str, sleep: float = 0.0) -> dict[str, Any]:
    runtime = client(served, "sagemaker-runtime")
    answer = runtime.invoke_endpoint(EndpointName="host", InferenceComponentName=name,
                                     Body=json.dumps({"sleep": sleep}), ContentType="application/json")
    return dict(json.loads(answer["Body"].read()))


# ---- AWS's documented snippets, unchanged but for the names


def test_awss_inference_component_target_tracking_snippet_runs_unchanged(gateway: Served) -> None:
    component(gateway, "tracked")
    aas_client = client(gateway, "application-autoscaling")
    inference_component_name, max_copy_count = "tracked", 4
    resource_id = f"inference-component/{inference_component_name}"
    service_namespace = "sagemaker"
    scalable_dimension = "sagemaker:inference-component:DesiredCopyCount"
    aas_client.register_scalable_target(
        ServiceNamespace=service_namespace,
        ResourceId=resource_id,
        ScalableDimension=scalable_dimension,
        MinCapacity=1,
        MaxCapacity=max_copy_count,
    )
    policy_name = f"target-tracking-{inference_component_name}"
    aas_client.put_scaling_policy(
        PolicyName=policy_name,
        PolicyType="TargetTrackingScaling",
        ServiceNamespace=service_namespace,
        ResourceId=resource_id,
        ScalableDimension=scalable_dimension,
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy",
            },
            "TargetValue": 1,
            "ScaleInCooldown": 300,
            "ScaleOutCooldown": 300,
        },
    )
    targets = aas_client.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource_id])
    [target] = targets["ScalableTargets"]
    assert (target["MinCapacity"], target["MaxCapacity"], target["ScalableDimension"]) == (1, 4, scalable_dimension)
    assert target["SuspendedState"] == {"DynamicScalingInSuspended": False, "DynamicScalingOutSuspended": False,
                                        "ScheduledScalingSuspended": False}
    [policy] = aas_client.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource_id)[
        "ScalingPolicies"]
    assert policy["PolicyName"] == policy_name and policy["PolicyType"] == "TargetTrackingScaling"
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 1.0
    # Three invocations within the scaler's 2 s window on one copy (90 a minute per copy), target 1: as many copies
    # as the target allows, at once.
    for _ in range(3):
        invoke(gateway, "tracked")
    wait_for(lambda: copy_count(gateway, "tracked") == (4, 4))
    activities = aas_client.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=resource_id)[
        "ScalingActivities"]
    assert activities[0]["StatusCode"] in ("InProgress", "Successful")
    assert "InvocationsPerCopy" in activities[0]["Cause"] and "from 1 to 4" in activities[0]["Cause"]
    wait_for(lambda: aas_client.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=resource_id)[
        "ScalingActivities"][0]["StatusCode"] == "Successful")
    aas_client.delete_scaling_policy(PolicyName=policy_name, ServiceNamespace=service_namespace,
                                     ResourceId=resource_id, ScalableDimension=scalable_dimension)
    aas_client.deregister_scalable_target(ServiceNamespace=service_namespace, ResourceId=resource_id,
                                          ScalableDimension=scalable_dimension)
    assert aas_client.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource_id])[
        "ScalableTargets"] == []


def test_awss_scale_to_zero_snippet_runs_unchanged_and_pier_wakes_the_component_itself(gateway: Served) -> None:
    component(gateway, "sleepy")
    aas_client = client(gateway, "application-autoscaling")
    cw_client = client(gateway, "cloudwatch")
    inference_component_name = "sleepy"
    resource_id = f"inference-component/{inference_component_name}"
    service_namespace = "sagemaker"
    scalable_dimension = "sagemaker:inference-component:DesiredCopyCount"
    aas_client.register_scalable_target(
        ServiceNamespace=service_namespace,
        ResourceId=resource_id,
        ScalableDimension=scalable_dimension,
        MinCapacity=0,
        MaxCapacity=2,
    )
    aas_client.put_scaling_policy(
        PolicyName="inference-component-target-tracking-scaling-policy",
        PolicyType="TargetTrackingScaling",
        ServiceNamespace=service_namespace,
        ResourceId=resource_id,
        ScalableDimension=scalable_dimension,
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution",
            },
            "TargetValue": 5,
            "ScaleInCooldown": 1,  # AWS's snippet says 300: the test waits one second instead of five minutes
            "ScaleOutCooldown": 300,
        },
    )
    resp = aas_client.put_scaling_policy(
        PolicyName="inference-component-step-scaling-policy",
        PolicyType="StepScaling",
        ServiceNamespace=service_namespace,
        ResourceId=resource_id,
        ScalableDimension=scalable_dimension,
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity",
            "MetricAggregationType": "Maximum",
            "Cooldown": 60,
            "StepAdjustments": [
                {
                    "MetricIntervalLowerBound": 0,
                    "ScalingAdjustment": 1,
                }
            ],
        },
    )
    step_scaling_policy_arn = resp["PolicyARN"]
    cw_client.put_metric_alarm(
        AlarmName="ic-step-scaling-policy-alarm",
        AlarmActions=[step_scaling_policy_arn],
        MetricName="NoCapacityInvocationFailures",
        Namespace="AWS/SageMaker",
        Statistic="Maximum",
        Dimensions=[
            {
                "Name": "InferenceComponentName",
                "Value": inference_component_name,
            }
        ],
        Period=30,
        EvaluationPeriods=1,
        DatapointsToAlarm=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData="missing",
    )
    [alarm] = cw_client.describe_alarms(AlarmNames=["ic-step-scaling-policy-alarm"])["MetricAlarms"]
    assert alarm["AlarmActions"] == [step_scaling_policy_arn] and alarm["Threshold"] == 1.0

    # No traffic for the scale-in cooldown: zero copies.
    wait_for(lambda: copy_count(gateway, "sleepy") == (0, 0), timeout=10)
    # A request then is answered, not failed: pier starts a copy and the request waits for it.
    assert invoke(gateway, "sleepy") == {"sleep": 0}
    causes = [a["Cause"] for a in aas_client.describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=resource_id)["ScalingActivities"]]
    woke = next(i for i, cause in enumerate(causes) if "had no copies" in cause)  # (newer: back to zero, idle)
    assert "from 0 to 1" in causes[woke]
    assert "ConcurrentRequestsPerCopy" in causes[woke + 1] and "from 1 to 0" in causes[woke + 1]
    # The request that found no copies is in NoCapacityInvocationFailures, and AWS's alarm on it fires; its step
    # policy does not add a second copy: pier's wake-up was the scale-out, and the policy's cooldown counts from it.
    wait_for(lambda: cw_client.describe_alarms(AlarmNames=["ic-step-scaling-policy-alarm"])["MetricAlarms"][0][
        "StateValue"] == "ALARM")
    now = time.time()
    stats = cw_client.get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName="NoCapacityInvocationFailures",
        Dimensions=[{"Name": "InferenceComponentName", "Value": "sleepy"}], StartTime=now - 60, EndTime=now + 1,
        Period=60, Statistics=["Sum", "Maximum"])
    assert [(p["Sum"], p["Maximum"]) for p in stats["Datapoints"]] == [(1.0, 1.0)]
    time.sleep(0.5)  # a few of the scaler's rounds with the alarm in ALARM
    later = [a["Cause"] for a in aas_client.describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=resource_id)["ScalingActivities"]]
    assert not any("step scaling policy" in cause for cause in later), later


# ---- copies follow the load


def test_concurrent_load_scales_out_at_once_and_in_after_the_cooldown_with_no_request_failing(
        gateway: Served) -> None:
    component(gateway, "busy")
    aas = client(gateway, "application-autoscaling")
    resource = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/busy",
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    aas.register_scalable_target(**resource, MinCapacity=1, MaxCapacity=3)
    aas.put_scaling_policy(PolicyName="concurrency", PolicyType="TargetTrackingScaling", **resource,
                           TargetTrackingScalingPolicyConfiguration={
                               "PredefinedMetricSpecification": {"PredefinedMetricType":
                                   "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"},
                               "TargetValue": 1, "ScaleOutCooldown": 0, "ScaleInCooldown": 2})
    seen: list[tuple[int, int]] = []
    with ThreadPoolExecutor(6) as pool:
        answers = [pool.submit(invoke, gateway, "busy", 1.5) for _ in range(6)]
        wait_for(lambda: seen.append(copy_count(gateway, "busy")) or seen[-1] == (3, 3))
        assert [a.result() for a in answers] == [{"sleep": 1.5}] * 6
    wait_for(lambda: copy_count(gateway, "busy") == (1, 1), timeout=10)

    def activities() -> list[dict[str, Any]]:
        return list(aas.describe_scaling_activities(
            ServiceNamespace="sagemaker", ResourceId="inference-component/busy")["ScalingActivities"])

    wait_for(lambda: all(a["StatusCode"] == "Successful" for a in activities()))
    done = activities()  # newest first: out to 3 (in one or two steps), then in to 1 (in one or two steps)
    assert "to 1" in done[0]["Cause"] and "stayed at or below" in done[0]["Cause"]
    assert any("to 3" in a["Cause"] and "above the target 1" in a["Cause"] for a in done)


def test_disable_scale_in_keeps_the_copies(gateway: Served) -> None:
    component(gateway, "kept", copies=2)
    aas = client(gateway, "application-autoscaling")
    resource = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/kept",
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    aas.register_scalable_target(**resource, MinCapacity=0, MaxCapacity=3)
    aas.put_scaling_policy(PolicyName="p", PolicyType="TargetTrackingScaling", **resource,
                           TargetTrackingScalingPolicyConfiguration={
                               "PredefinedMetricSpecification": {"PredefinedMetricType":
                                   "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"},
                               "TargetValue": 1, "ScaleInCooldown": 0, "DisableScaleIn": True})
    time.sleep(1.0)
    assert copy_count(gateway, "kept") == (2, 2)


def test_a_variant_scales_its_instance_count_through_update_endpoint_weights_and_capacities(
        gateway: Served) -> None:
    aas = client(gateway, "application-autoscaling")
    resource = {"ServiceNamespace": "sagemaker", "ResourceId": "endpoint/host/variant/AllTraffic",
                "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}
    aas.register_scalable_target(**resource, MinCapacity=2, MaxCapacity=2)  # above the count: scaled up to it
    sagemaker = sagemaker_client(gateway.url)
    wait_for(lambda: sagemaker.describe_endpoint(EndpointName="host")["ProductionVariants"][0][
        "DesiredInstanceCount"] == 2)
    [activity] = aas.describe_scaling_activities(ServiceNamespace="sagemaker",
                                                 ResourceId="endpoint/host/variant/AllTraffic")["ScalingActivities"]
    assert activity["Description"] == "Setting desired instance count to 2."
    assert "outside the target's bounds" in activity["Cause"]
    aas.deregister_scalable_target(**resource)


# ---- errors, in each service's words


def test_application_autoscaling_errors(gateway: Served) -> None:
    aas = client(gateway, "application-autoscaling")
    ic = {"ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("register_scalable_target", {**ic, "ResourceId": "inference-component/nope", "MinCapacity": 0,
                                      "MaxCapacity": 1}, "ValidationException", "does not exist"),
        ("register_scalable_target", {**ic, "ResourceId": "endpoint/host/variant/AllTraffic", "MinCapacity": 0,
                                      "MaxCapacity": 1}, "ValidationException", "use sagemaker:variant"),
        ("register_scalable_target", {**ic, "ServiceNamespace": "ecs", "ResourceId": "service/x/y",
                                      "MinCapacity": 0, "MaxCapacity": 1}, "ValidationException", "'sagemaker'"),
        ("register_scalable_target", {"ServiceNamespace": "sagemaker", "ResourceId": "endpoint/host/variant/AllTraffic",
                                      "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                                      "MinCapacity": 0, "MaxCapacity": 1}, "ValidationException", "at least 1"),
        ("put_scaling_policy", {**ic, "ResourceId": "inference-component/unregistered", "PolicyName": "p",
                                "PolicyType": "TargetTrackingScaling",
                                "TargetTrackingScalingPolicyConfiguration": {"TargetValue": 1}},
         "ObjectNotFoundException", "RegisterScalableTarget"),
        ("delete_scaling_policy", {**ic, "ResourceId": "inference-component/x", "PolicyName": "nope"},
         "ObjectNotFoundException", "DescribeScalingPolicies"),
        ("deregister_scalable_target", {**ic, "ResourceId": "inference-component/x"}, "ObjectNotFoundException",
         "No scalable target"),
    ]
    for method, parameters, code, words in cases:
        with pytest.raises(ClientError) as raised:
            getattr(aas, method)(**parameters)
        assert raised.value.response["Error"]["Code"] == code, method
        assert words in raised.value.response["Error"]["Message"], (method, raised.value.response["Error"])
    component(gateway, "checked")
    aas.register_scalable_target(**ic, ResourceId="inference-component/checked", MinCapacity=1, MaxCapacity=1)
    with pytest.raises(ClientError) as raised:
        aas.put_scaling_policy(**ic, ResourceId="inference-component/checked", PolicyName="p",
                               PolicyType="TargetTrackingScaling", TargetTrackingScalingPolicyConfiguration={
                                   "TargetValue": 1, "PredefinedMetricSpecification": {
                                       "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})
    assert "is for variants" in raised.value.response["Error"]["Message"]
    # botocore's own model is the first check: a raw request with a wrong type is refused with its report.
    answer = httpx.post(gateway.url, content=json.dumps({"ServiceNamespace": "sagemaker", "MinCapacity": "x"}),
                        headers={"X-Amz-Target": "AnyScaleFrontendService.RegisterScalableTarget",
                                 "Content-Type": "application/x-amz-json-1.1"})
    assert answer.status_code == 400 and answer.json()["__type"] == "ValidationException"
    assert "Missing required parameter" in answer.json()["message"] and "MinCapacity" in answer.json()["message"]


def test_cloudwatch_errors(gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    now = time.time()
    with pytest.raises(ClientError) as raised:
        cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocations", StartTime=now - 60,
                                 EndTime=now, Period=7, Statistics=["Sum"])
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
    with pytest.raises(cw.exceptions.ResourceNotFound):
        cw.delete_alarms(AlarmNames=["never-made"])
    with pytest.raises(ClientError) as raised:
        cw.put_metric_alarm(AlarmName="pct", MetricName="ModelLatency", Namespace="AWS/SageMaker",
                            ExtendedStatistic="p99", Period=60, EvaluationPeriods=1, Threshold=1,
                            ComparisonOperator="GreaterThanThreshold")
    assert "percentiles" in raised.value.response["Error"]["Message"]


def test_put_metric_data_counts_a_million_samples_at_once_and_refuses_what_is_over_awss_quotas(
        gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    dims = [{"Name": "Test", "Value": "million"}]
    started = time.monotonic()
    cw.put_metric_data(Namespace="Loop", MetricData=[{"MetricName": "Waits", "Dimensions": dims, "Values": [2.0, 5.0],
                                                      "Counts": [1e6, 1e9]}])
    assert time.monotonic() - started < 2.0  # a count is merged once, never looped over
    now = time.time()
    [point] = cw.get_metric_statistics(Namespace="Loop", MetricName="Waits", Dimensions=dims, StartTime=now - 60,
                                       EndTime=now + 1, Period=60,
                                       Statistics=["SampleCount", "Sum", "Minimum", "Maximum"])["Datapoints"]
    assert (point["SampleCount"], point["Sum"], point["Minimum"], point["Maximum"]) == (1e6 + 1e9, 2e6 + 5e9, 2.0, 5.0)
    cases = [([{"MetricName": "Waits", "Values": [1.0] * 151}], "InvalidParameterValue",
              "The collection MetricData.member.1.Values must not have a size greater than 150"),
             ([{"MetricName": "Waits", "Value": 1.0}] * 1001, "InvalidParameterValue",
              "The collection MetricData must not have a size greater than 1000"),
             ([{"MetricName": "Waits", "Value": 1.0, "Values": [1.0]}], "InvalidParameterCombination",
              "are mutually exclusive")]
    for data, code, words in cases:
        with pytest.raises(ClientError) as raised:
            cw.put_metric_data(Namespace="Loop", MetricData=data)
        assert raised.value.response["Error"]["Code"] == code and words in raised.value.response["Error"]["Message"]


def test_the_largest_put_metric_data_botocore_gzips_is_taken_whole(gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    data = [{"MetricName": "Full", "Dimensions": [{"Name": "Row", "Value": str(i)}],
             "Values": [float(v) for v in range(150)], "Counts": [3.0] * 150} for i in range(1000)]
    sent: list[str] = []
    cw.meta.events.register("before-send.cloudwatch.PutMetricData",
                            lambda request, **_: sent.append(request.headers.get("Content-Encoding", b"")))
    cw.put_metric_data(Namespace="Loop", MetricData=data)
    assert sent == [b"gzip"] or sent == ["gzip"]  # over botocore's 10 KB: compressed
    now = time.time()
    [point] = cw.get_metric_statistics(Namespace="Loop", MetricName="Full", Dimensions=[{"Name": "Row",
                                                                                         "Value": "999"}],
                                       StartTime=now - 60, EndTime=now + 1, Period=60,
                                       Statistics=["SampleCount", "Sum"])["Datapoints"]
    assert (point["SampleCount"], point["Sum"]) == (450.0, 3.0 * sum(range(150)))
    bomb = gzip.compress(b"0" * (64 << 20))  # 64 KB on the wire, 64 MB inflated: refused, never read whole
    response = httpx.post(gateway.url, content=bomb, headers={
        "X-Amz-Target": "GraniteServiceVersion20100801.PutMetricData", "Content-Type": "application/x-amz-json-1.0",
        "Content-Encoding": "gzip"})
    assert response.status_code == 400 and response.json()["__type"] == "ValidationException"
    assert "once decompressed" in response.json()["message"]


# ---- metrics


def test_invocations_are_aws_sagemaker_metrics_in_cloudwatch_and_prometheus(gateway: Served) -> None:
    component(gateway, "measured")
    for _ in range(2):
        invoke(gateway, "measured", 0.05)
    cw = client(gateway, "cloudwatch")
    dims = [{"Name": "InferenceComponentName", "Value": "measured"}]
    listed = cw.list_metrics(Namespace="AWS/SageMaker", Dimensions=dims)["Metrics"]
    assert {"Invocations", "InvocationsPerCopy", "ModelLatency", "OverheadLatency", "Invocation4XXErrors",
            "Invocation5XXErrors"} <= {m["MetricName"] for m in listed}
    now = time.time()
    data = cw.get_metric_data(StartTime=now - 120, EndTime=now + 1, MetricDataQueries=[
        {"Id": "calls", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "Invocations",
                                                  "Dimensions": dims}, "Period": 60, "Stat": "Sum"}},
        {"Id": "latency", "MetricStat": {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": "ModelLatency",
                                                    "Dimensions": dims}, "Period": 60, "Stat": "Minimum"}}])
    results = {r["Id"]: r for r in data["MetricDataResults"]}
    assert sum(results["calls"]["Values"]) == 2 and results["calls"]["StatusCode"] == "Complete"
    assert min(results["latency"]["Values"]) >= 50_000  # microseconds: the copy slept 0.05 s
    stats = cw.get_metric_statistics(Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors",
                                     Dimensions=dims, StartTime=now - 120, EndTime=now + 1, Period=60,
                                     Statistics=["Sum", "SampleCount"])
    assert sum(p["Sum"] for p in stats["Datapoints"]) == 0 and sum(p["SampleCount"] for p in stats["Datapoints"]) == 2
    text = httpx.get(gateway.url + "/metrics").text
    assert 'pier_sagemaker_invocations_total{component="measured",endpoint="host",variant="AllTraffic"} 2.0' in text


def cbor_cloudwatch(url: str, folder: Path, protocol: str = "smithy-rpc-v2-cbor") -> Any:
    """botocore's own CloudWatch client in one of the protocols its model lists: Smithy RPC v2 CBOR (listed first;
    today's boto3 picks JSON 1.0 from the same list) or query (what older botocore sent): the model with only that
    protocol, from a data path of its own."""
    shipped = Path(botocore.__file__).parent / "data" / "cloudwatch" / "2010-08-01" / "service-2.json.gz"
    model = json.loads(gzip.decompress(shipped.read_bytes()))
    model["metadata"]["protocols"] = [protocol]
    model["metadata"]["protocol"] = protocol
    (folder / "cloudwatch" / "2010-08-01").mkdir(parents=True)
    (folder / "cloudwatch" / "2010-08-01" / "service-2.json").write_text(json.dumps(model))
    session = botocore.session.get_session()
    session.set_config_variable("data_path", str(folder))
    return session.create_client("cloudwatch", endpoint_url=url, region_name="us-east-1", aws_access_key_id="pier",
                                 aws_secret_access_key="pier", config=Config(retries={"total_max_attempts": 1}))


@pytest.mark.parametrize("protocol", ["smithy-rpc-v2-cbor", "query"])
def test_botocores_cbor_and_query_clients_get_their_answers_and_errors(gateway: Served, tmp_path: Path,
                                                                      protocol: str) -> None:
    cw = cbor_cloudwatch(gateway.url, tmp_path, protocol)
    assert cw.meta.service_model.protocol == protocol
    cw.put_metric_data(Namespace="Mine", MetricData=[{"MetricName": "Queue", "Value": 3.0, "Unit": "Count",
                                                      "Dimensions": [{"Name": "Via", "Value": protocol}]}])
    dims = [{"Name": "Via", "Value": protocol}]
    cw.put_metric_alarm(AlarmName=f"{protocol}-alarm", MetricName="Queue", Namespace="Mine", Statistic="Maximum",
                        Period=10, EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanThreshold",
                        Dimensions=dims, AlarmActions=["arn:aws:autoscaling:policy"])
    [alarm] = cw.describe_alarms(AlarmNames=[f"{protocol}-alarm"])["MetricAlarms"]
    assert alarm["Threshold"] == 1.0 and alarm["AlarmConfigurationUpdatedTimestamp"].year >= 2024
    assert alarm["Dimensions"] == dims and alarm["AlarmActions"] == ["arn:aws:autoscaling:policy"]
    now = time.time()
    stats = cw.get_metric_statistics(Namespace="Mine", MetricName="Queue", StartTime=now - 60, EndTime=now + 1,
                                     Period=60, Statistics=["Maximum"], Dimensions=dims)
    assert [p["Maximum"] for p in stats["Datapoints"]] == [3.0] and stats["Datapoints"][0]["Unit"] == "Count"
    listed = cw.list_metrics(Namespace="Mine")["Metrics"]  # filtered: other tests' metrics fill the first page
    assert {"MetricName": "Queue", "Namespace": "Mine", "Dimensions": dims} in listed
    with pytest.raises(cw.exceptions.ResourceNotFound):
        cw.delete_alarms(AlarmNames=["never-made"])
    with pytest.raises(ClientError) as raised:
        cw.get_metric_statistics(Namespace="Mine", MetricName="Queue", StartTime=now - 60, EndTime=now, Period=7,
                                 Statistics=["Sum"])
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
    cw.delete_alarms(AlarmNames=[f"{protocol}-alarm"])


def test_cloudwatch_answers_smithy_rpc_v2_cbor(gateway: Served) -> None:
    answer = httpx.post(gateway.url + "/service/GraniteServiceVersion20100801/operation/ListMetrics",
                        content=cbor2.dumps({"Namespace": "AWS/SageMaker"}),
                        headers={"smithy-protocol": "rpc-v2-cbor", "Content-Type": "application/cbor",
                                 "Accept": "application/cbor"})
    assert answer.status_code == 200 and answer.headers["smithy-protocol"] == "rpc-v2-cbor"
    assert isinstance(cbor2.loads(answer.content)["Metrics"], list)
    refused = httpx.post(gateway.url + "/service/GraniteServiceVersion20100801/operation/DeleteAlarms",
                         content=cbor2.dumps({"AlarmNames": ["none"]}),
                         headers={"smithy-protocol": "rpc-v2-cbor", "Content-Type": "application/cbor"})
    assert refused.status_code == 404 and cbor2.loads(refused.content)["__type"] == "ResourceNotFoundException"


def test_a_scale_out_that_does_not_fit_the_instances_is_a_failed_activity_with_the_reason(gateway: Served) -> None:
    sagemaker = sagemaker_client(gateway.url)
    sagemaker.create_endpoint(EndpointName="solo", EndpointConfigName="host")  # one instance of its own
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="solo", WaiterConfig=FAST)
    sagemaker.create_inference_component(
        InferenceComponentName="huge", EndpointName="solo", VariantName="AllTraffic",
        Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 15_000}},
        RuntimeConfig={"CopyCount": 1})
    wait_for(lambda: copy_count(gateway, "huge") == (1, 1))
    aas = client(gateway, "application-autoscaling")
    resource = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/huge",
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    aas.register_scalable_target(**resource, MinCapacity=2, MaxCapacity=2)  # two copies of 15 GB on one instance

    def settled() -> dict[str, Any] | None:
        found = aas.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=resource[
            "ResourceId"])["ScalingActivities"]
        return found[0] if found and found[0]["StatusCode"] != "InProgress" else None

    activity = wait_for(settled)
    assert activity["StatusCode"] == "Failed" and "15000" in activity["StatusMessage"], activity
    assert copy_count(gateway, "huge")[1] == 1  # the copy it had still serves


def registered(gateway: Served, name: str) -> tuple[Any, dict[str, str]]:
    """A component `name` whose copy count is a scalable target (1 to 3): the client and the target's fields."""
    component(gateway, name)
    aas = client(gateway, "application-autoscaling")
    resource = {"ServiceNamespace": "sagemaker", "ResourceId": f"inference-component/{name}",
                "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    aas.register_scalable_target(**resource, MinCapacity=1, MaxCapacity=3)
    return aas, resource


def test_a_scheduled_action_sets_the_bounds_and_the_copies_follow(gateway: Served) -> None:
    aas, resource = registered(gateway, "nightly")
    soon = datetime.now(UTC) + timedelta(seconds=2)
    aas.put_scheduled_action(**resource, ScheduledActionName="morning",
                             Schedule=f"at({soon.strftime('%Y-%m-%dT%H:%M:%S')})",
                             ScalableTargetAction={"MinCapacity": 2, "MaxCapacity": 3})
    [action] = aas.describe_scheduled_actions(ServiceNamespace="sagemaker", ResourceId=resource["ResourceId"])[
        "ScheduledActions"]
    assert action["ScalableTargetAction"] == {"MinCapacity": 2, "MaxCapacity": 3}
    assert action["Schedule"].startswith("at(") and action["ScheduledActionARN"].startswith("arn:aws:autoscaling")
    wait_for(lambda: copy_count(gateway, "nightly") == (2, 2), timeout=10)
    [target] = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource["ResourceId"]])[
        "ScalableTargets"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 3)
    causes = [a["Cause"] for a in aas.describe_scaling_activities(
        ServiceNamespace="sagemaker", ResourceId=resource["ResourceId"])["ScalingActivities"]]
    assert any("scheduled action morning" in cause for cause in causes), causes
    with pytest.raises(ClientError) as raised:
        aas.put_scheduled_action(**resource, ScheduledActionName="bad", Schedule="cron(0 25 * * ? *)")
    assert "outside 0-23" in raised.value.response["Error"]["Message"]
    aas.delete_scheduled_action(**resource, ScheduledActionName="morning")
    assert aas.describe_scheduled_actions(ServiceNamespace="sagemaker")["ScheduledActions"] == []


def test_a_next_token_resumes_after_its_page_when_rows_are_deleted_or_added_in_between(gateway: Served) -> None:
    aas = client(gateway, "application-autoscaling")
    names = ["page-a", "page-b", "page-c"]
    ids = [f"inference-component/{n}" for n in names]
    ic = {"ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
    for name, resource_id in zip(names, ids, strict=True):
        component(gateway, name)
        aas.register_scalable_target(**ic, ResourceId=resource_id, MinCapacity=1, MaxCapacity=2)
    first = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=ids, MaxResults=1)
    assert [t["ResourceId"] for t in first["ScalableTargets"]] == ids[:1]
    aas.deregister_scalable_target(**ic, ResourceId=ids[0])  # an index token would now skip page-b
    second = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=ids, MaxResults=1,
                                           NextToken=first["NextToken"])
    assert [t["ResourceId"] for t in second["ScalableTargets"]] == ids[1:2]
    aas.register_scalable_target(**ic, ResourceId=ids[0], MinCapacity=1, MaxCapacity=2)  # comes last now
    third = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=ids, MaxResults=1,
                                          NextToken=second["NextToken"])
    assert [t["ResourceId"] for t in third["ScalableTargets"]] == ids[2:3]
    cw = client(gateway, "cloudwatch")
    alarm = {"MetricName": "Invocations", "Namespace": "AWS/SageMaker", "Statistic": "Sum", "Period": 60,
             "EvaluationPeriods": 1, "Threshold": 1, "ComparisonOperator": "GreaterThanThreshold"}
    for name in names:
        cw.put_metric_alarm(AlarmName=name, **alarm)
    first = cw.describe_alarms(AlarmNamePrefix="page-", MaxRecords=1)
    cw.delete_alarms(AlarmNames=["page-a"])
    second = cw.describe_alarms(AlarmNamePrefix="page-", MaxRecords=1, NextToken=first["NextToken"])
    assert [a["AlarmName"] for a in second["MetricAlarms"]] == ["page-b"]


def test_page_sizes_are_awss(gateway: Served) -> None:
    aas = client(gateway, "application-autoscaling")
    for size in (0, 51, -1):
        with pytest.raises(ClientError) as raised:
            aas.describe_scalable_targets(ServiceNamespace="sagemaker", MaxResults=size)
        assert raised.value.response["Error"]["Code"] == "ValidationException", size
        assert "between 1 and 50" in raised.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as raised:
        aas.describe_scaling_policies(ServiceNamespace="sagemaker", MaxResults=11)  # its most is 10
    assert "between 1 and 10" in raised.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as raised:
        aas.describe_scalable_targets(ServiceNamespace="sagemaker", NextToken="-1")
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError) as raised:
        client(gateway, "cloudwatch").describe_alarms(MaxRecords=101)
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"


def test_get_metric_statistics_refuses_a_statistic_it_does_not_compute_instead_of_failing(gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    cw.put_metric_data(Namespace="Probe", MetricData=[{"MetricName": "Queue", "Value": 3.0}])
    now = datetime.now(UTC)
    window = {"Namespace": "Probe", "MetricName": "Queue", "StartTime": now - timedelta(minutes=5),
              "EndTime": now + timedelta(minutes=1), "Period": 60}
    wait_for(lambda: cw.get_metric_statistics(**window, Statistics=["Sum"])["Datapoints"] != [])
    with pytest.raises(ClientError) as raised:  # was a 500 InternalFailure once a datapoint was there
        cw.get_metric_statistics(**window, Statistics=["Sum", "p99"])
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "ExtendedStatistics" in raised.value.response["Error"]["Message"]


def test_an_alarm_whose_name_differs_only_in_case_does_not_replace_or_delete_another(gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    alarm = {"MetricName": "Invocations", "Namespace": "AWS/SageMaker", "Statistic": "Sum", "Period": 60,
             "EvaluationPeriods": 1, "Threshold": 1, "ComparisonOperator": "GreaterThanThreshold"}
    cw.put_metric_alarm(AlarmName="CaseAlarm", **alarm)
    with pytest.raises(ClientError) as raised:
        cw.put_metric_alarm(AlarmName="casealarm", **alarm)
    assert raised.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert "CaseAlarm" in raised.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as raised:
        cw.delete_alarms(AlarmNames=["CASEALARM"])
    assert raised.value.response["Error"]["Code"] == "ResourceNotFound"
    assert [a["AlarmName"] for a in cw.describe_alarms(AlarmNamePrefix="Case")["MetricAlarms"]] == ["CaseAlarm"]
    cw.delete_alarms(AlarmNames=["CaseAlarm"])


def test_periods_time_ranges_and_query_ids_are_checked_as_aws_checks_them(gateway: Served) -> None:
    cw = client(gateway, "cloudwatch")
    cw.put_metric_data(Namespace="Probe", MetricData=[{"MetricName": "Depth", "Value": 2.0}])
    now = datetime.now(UTC)
    window = {"StartTime": now - timedelta(minutes=5), "EndTime": now + timedelta(minutes=1)}
    stat = {"Metric": {"Namespace": "Probe", "MetricName": "Depth"}, "Stat": "Sum"}
    wait_for(lambda: cw.get_metric_statistics(Namespace="Probe", MetricName="Depth", **window, Period=20,
                                              Statistics=["Sum"])["Datapoints"] != [])  # 20 s is AWS's too
    refused: list[tuple[Any, dict[str, Any], str]] = [
        (cw.get_metric_data, {**window, "MetricDataQueries": [{"Id": "q", "MetricStat": {**stat, "Period": 7}}]},
         "MetricDataQueries.member.1.MetricStat.Period"),
        (cw.get_metric_data, {"StartTime": window["EndTime"], "EndTime": window["StartTime"],
                              "MetricDataQueries": [{"Id": "q", "MetricStat": {**stat, "Period": 60}}]},
         "StartTime must be less than"),
        (cw.get_metric_data, {**window, "MetricDataQueries": [{"Id": "q", "MetricStat": {**stat, "Period": 60}}] * 2},
         "more than one"),
        (cw.put_metric_alarm, {"AlarmName": "seven", "MetricName": "Depth", "Namespace": "Probe", "Statistic": "Sum",
                               "Period": 7, "EvaluationPeriods": 1, "Threshold": 1,
                               "ComparisonOperator": "GreaterThanThreshold"}, "10, 20, 30"),
    ]
    for method, arguments, words in refused:
        with pytest.raises(ClientError) as raised:
            method(**arguments)
        assert raised.value.response["Error"]["Code"] == "InvalidParameterValue", words
        assert words in raised.value.response["Error"]["Message"]


@pytest.mark.parametrize(("fields", "words"), [
    ({"EvaluationPeriods": 2, "DatapointsToAlarm": 3}, "DatapointsToAlarm (3) must be less than or equal to "
                                                       "EvaluationPeriods (2)"),
    ({"EvaluationPeriods": 2, "TreatMissingData": "sometimes"}, "TreatMissingData 'sometimes' is not one of"),
])
def test_an_alarm_that_could_never_fire_as_asked_is_refused(gateway: Served, fields: dict[str, Any],
                                                            words: str) -> None:
    cw = client(gateway, "cloudwatch")
    with pytest.raises(ClientError) as raised:
        cw.put_metric_alarm(AlarmName="never", MetricName="Queue", Namespace="Mine", Statistic="Maximum", Period=60,
                            Threshold=1, ComparisonOperator="GreaterThanThreshold", **fields)
    assert words in raised.value.response["Error"]["Message"]
    assert cw.describe_alarms(AlarmNames=["never"])["MetricAlarms"] == []


def test_a_scheduled_action_that_ends_before_it_starts_is_refused(gateway: Served) -> None:
    aas, resource = registered(gateway, "backwards")
    now = datetime.now(UTC)
    with pytest.raises(ClientError) as raised:
        aas.put_scheduled_action(**resource, ScheduledActionName="backwards", Schedule="rate(1 hour)",
                                 StartTime=now + timedelta(days=2), EndTime=now + timedelta(days=1))
    assert "StartTime must be before EndTime" in raised.value.response["Error"]["Message"]
    assert aas.describe_scheduled_actions(ServiceNamespace="sagemaker",
                                          ResourceId=resource["ResourceId"])["ScheduledActions"] == []
