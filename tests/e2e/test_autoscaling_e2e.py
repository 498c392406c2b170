"""Autoscaling end to end: a `pier up` gateway process with real copies of a TINY GGUF (one request at a time
each), a target-tracking policy on ConcurrentRequestsPerCopy with MinCapacity 0, and load that rises and falls.
Copies rise with the load and fall back to zero when it stops, no request fails on the way, and from zero copies
the first request is answered within the copy's start time plus a small margin."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

WAIT = {"Delay": 0.5, "MaxAttempts": 240}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
BODY = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 24, "ignore_eos": True}})
RESOURCE = {"ServiceNamespace": "sagemaker", "ResourceId": "inference-component/tiny",
            "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount"}
# What answering the first request may add to the copy's start: the new copy's first inference, on a machine that
# other tests share (docs/benchmarks.md records 0-2 s on a quieter one).
MARGIN_S = 5.0


def aws(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1}, read_timeout=60))


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("autoscaling")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    env = {**FAKE_AWS, "PIER_AUTOSCALING_INTERVAL_S": "0.5", "PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S": "2"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        process.wait_ready()
        _deploy(process.url, folder / "model")
        yield process.url


def _deploy(url: str, model_dir: Path) -> None:
    sagemaker = aws(url, "sagemaker")
    sagemaker.create_model(ModelName="tiny", PrimaryContainer={
        "Image": "pier", "ModelDataUrl": f"file://{model_dir}",
        "Environment": {"MAX_CONCURRENT_REQUESTS": "1", "PIER_PARALLEL": "1"}})
    sagemaker.create_endpoint_config(EndpointConfigName="host", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="host", EndpointConfigName="host")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="host", WaiterConfig=WAIT)
    sagemaker.create_inference_component(
        InferenceComponentName="tiny", EndpointName="host", VariantName="AllTraffic",
        Specification={"ModelName": "tiny", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 1})
    until(lambda: ready_copies(url) == 1, 120)
    scaling = aws(url, "application-autoscaling")
    scaling.register_scalable_target(**RESOURCE, MinCapacity=0, MaxCapacity=3)
    scaling.put_scaling_policy(
        PolicyName="concurrency", PolicyType="TargetTrackingScaling", **RESOURCE,
        TargetTrackingScalingPolicyConfiguration={
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution"},
            "TargetValue": 1, "ScaleOutCooldown": 10, "ScaleInCooldown": 4})


def ready_copies(url: str) -> int:
    copies = httpx.get(f"{url}/pier/copies").json()["copies"]
    return sum(1 for c in copies if c["component"] == "tiny" and c["state"] == "Ready")


def until(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.2)


def invoke(url: str, runtime: Any = None) -> str:
    try:
        (runtime or aws(url, "sagemaker-runtime")).invoke_endpoint(
            EndpointName="host", InferenceComponentName="tiny", ContentType="application/json", Body=BODY
        )["Body"].read()
        return "ok"
    except Exception as error:  # every failure is listed, whatever it is
        return repr(error)


def test_copies_follow_the_load_down_to_zero_and_back_and_no_request_fails(gateway: str) -> None:
    outcomes: list[str] = []
    counts: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            counts.append(ready_copies(gateway))
            time.sleep(0.25)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    busy_until = time.monotonic() + 12
    runtime = aws(gateway, "sagemaker-runtime")  # one client (boto3's are thread-safe): making one costs CPU
    with ThreadPoolExecutor(4) as pool:  # four clients back to back: four requests at once on one-at-a-time copies
        outcomes += pool.map(lambda _: _loop(gateway, runtime, busy_until), range(4))
    peak = max(counts)
    until(lambda: ready_copies(gateway) == 0, 30)  # idle for the scale-in cooldown: zero copies
    stop.set()
    watcher.join()
    failures = [o for batch in outcomes for o in batch if o != "ok"]
    assert failures == [], (failures, counts)
    # Four requests at once want four copies, three at most; on a machine busy with other work the clients may
    # not keep four in flight all the time, so at least two.
    assert peak >= 2, counts  # and back to zero: waited for above

    scaling = aws(gateway, "application-autoscaling")
    started = time.monotonic()
    assert invoke(gateway) == "ok"  # from zero copies: answered, not failed
    first_answer_s = time.monotonic() - started
    until(lambda: scaling.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=RESOURCE[
        "ResourceId"])["ScalingActivities"][0]["StatusCode"] == "Successful", 10)
    wake = scaling.describe_scaling_activities(ServiceNamespace="sagemaker", ResourceId=RESOURCE["ResourceId"])[
        "ScalingActivities"][0]
    assert "had no copies" in wake["Cause"]
    copy_start_s = (wake["EndTime"] - wake["StartTime"]).total_seconds()
    print(f"\nfirst answer from zero copies: {first_answer_s:.2f} s; the copy's start (activity): "
          f"{copy_start_s:.2f} s; copies seen: {sorted(set(counts))}")
    # The activity ends when the scaler next sees the copy ready (within a second): that bounds the start from above.
    assert first_answer_s <= copy_start_s + MARGIN_S, (first_answer_s, copy_start_s)
    # The copies' processes were measured as SageMaker measures an inference component's.
    cloudwatch = aws(gateway, "cloudwatch")
    names = {m["MetricName"] for m in cloudwatch.list_metrics(Namespace="/aws/sagemaker/InferenceComponents")[
        "Metrics"]}
    assert names == {"CPUUtilizationNormalized", "MemoryUtilizationNormalized"}
    now = time.time()
    cpu = cloudwatch.get_metric_statistics(
        Namespace="/aws/sagemaker/InferenceComponents", MetricName="CPUUtilizationNormalized", StartTime=now - 300,
        EndTime=now + 1, Period=300, Statistics=["Maximum"], Dimensions=[
            {"Name": "InferenceComponentName", "Value": "tiny"}])["Datapoints"]
    assert 0 < cpu[0]["Maximum"] <= 100 and cpu[0]["Unit"] == "Percent"


def _loop(url: str, runtime: Any, until_s: float) -> list[str]:
    done = []
    while time.monotonic() < until_s:
        done.append(invoke(url, runtime))
    return done
