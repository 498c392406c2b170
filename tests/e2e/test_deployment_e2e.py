"""Changing a live endpoint's model as a user does, under load: a `pier up` process, real copies of a tiny GGUF,
boto3 for UpdateEndpoint and for a thread that invokes the endpoint without pause (no retries, so any failed
request is counted). The old config's variant is AllTraffic, the new ones' Green, so the variant each answer names
(x-Amzn-Invoked-Production-Variant) says which fleet served it."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.server.byoc.test_pool import make_model
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT = "live"
FAULTY = """
    def model_fn(model_dir):
        return None

    def predict_fn(data, model):
        raise RuntimeError("this model is broken: every answer is a 500")
"""
BODY = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 2}})


class Load:
    """A thread invoking the endpoint back to back, counting answers by variant and every failure."""

    def __init__(self, url: str, **target: str) -> None:
        self.target = {"EndpointName": ENDPOINT, **target}
        self.runtime = boto3.client(
            "sagemaker-runtime", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
            aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1}, read_timeout=60))
        self.served: Counter[str] = Counter()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                answer = self.runtime.invoke_endpoint(ContentType="application/json", Body=BODY, **self.target)
                answer["Body"].read()
                self.served[answer["InvokedProductionVariant"]] += 1
            except Exception as error:  # every kind of failure counts: this is what a client would see
                self.failures.append(repr(error))

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=90)


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "good").mkdir()
    (folder / "good" / "model.gguf").symlink_to(tiny_gguf)
    (folder / "broken").mkdir()
    (folder / "broken" / "model.gguf").write_bytes(b"GGUF" + b"\0" * 4096)  # a header and nothing a loader takes
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log",
                        env={"PIER_AUTOSCALING_INTERVAL_S": "1"}) as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        for name, environment in (("good", {"MAX_TOTAL_TOKENS": "512"}), ("good-2", {"MAX_TOTAL_TOKENS": "768"}),
                                  ("good-3", {"MAX_TOTAL_TOKENS": "640"})):
            sagemaker.create_model(ModelName=name, PrimaryContainer={
                "ModelDataUrl": f"file://{folder / 'good'}", "Environment": environment})
        sagemaker.create_model(ModelName="broken", PrimaryContainer={"ModelDataUrl": f"file://{folder / 'broken'}"})
        config(sagemaker, "first", "good", "AllTraffic")
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="first")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
        yield process


def config(sagemaker: Any, name: str, model: str, variant: str = "Green") -> None:
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": variant, "ModelName": model, "InstanceType": "local", "InitialInstanceCount": 1}])


def settled(sagemaker: Any) -> dict[str, Any]:
    """DescribeEndpoint once the update has ended, either way."""
    until(lambda: sagemaker.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] != "Updating",
          timeout=180, what="the update to end")
    described: dict[str, Any] = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
    return described


def test_an_update_to_a_model_that_cannot_load_rolls_back_with_no_failed_request(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    config(sagemaker, "broken", "broken")
    with Load(gateway.url) as load:
        until(lambda: sum(load.served.values()) >= 3, timeout=60, what="load running")
        sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="broken")
        during = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
        assert during["EndpointStatus"] == "Updating"
        assert during["PendingDeploymentSummary"]["EndpointConfigName"] == "broken"
        described = settled(sagemaker)
        served = sum(load.served.values())
        until(lambda: sum(load.served.values()) > served + 2, timeout=60, what="load still served")
    assert described["EndpointStatus"] == "InService"
    assert described["EndpointConfigName"] == "first"
    assert "The new fleet could not become healthy" in described["FailureReason"]
    assert "PendingDeploymentSummary" not in described
    assert load.failures == []
    assert set(load.served) == {"AllTraffic"}


def test_a_canary_update_shifts_traffic_in_steps_and_completes(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    config(sagemaker, "canary", "good-2")
    weights: set[float] = set()
    with Load(gateway.url) as load:
        until(lambda: sum(load.served.values()) >= 3, timeout=60, what="load running")
        sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="canary", DeploymentConfig={
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 4,
                                                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50}},
                "TerminationWaitInSeconds": 1}})

        def canary_seen() -> bool:
            described = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
            pending = described.get("PendingDeploymentSummary")
            if pending:
                weights.add(pending["ProductionVariants"][0]["CurrentWeight"])
            return 0.5 in weights or described["EndpointStatus"] != "Updating"

        until(canary_seen, timeout=120, interval=0.2, what="the canary step")
        at_canary = Counter(load.served)
        until(lambda: load.served["Green"] > at_canary["Green"] + 2, timeout=30, what="the canary served")
        canary_old = load.served["AllTraffic"] - at_canary["AllTraffic"]
        described = settled(sagemaker)
        after = Counter(load.served)
        until(lambda: sum(load.served.values()) > sum(after.values()) + 3, timeout=60, what="load after")
        assert load.served["AllTraffic"] == after["AllTraffic"]  # the old fleet is gone
    assert 0.5 in weights
    assert canary_old > 0  # during the canary both fleets answered
    assert (described["EndpointStatus"], described["EndpointConfigName"]) == ("InService", "canary")
    assert "FailureReason" not in described
    assert described["ProductionVariants"][0]["VariantName"] == "Green"
    assert described["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]["Type"] == \
        "CANARY"
    assert load.failures == []


def test_an_update_whose_model_answers_5xx_trips_an_alarm_and_rolls_back(gateway: GatewayProcess,
                                                                         tmp_path: Path) -> None:
    sagemaker, _ = clients(gateway.url)
    cloudwatch = boto3.client("cloudwatch", endpoint_url=gateway.url, region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
    before = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
    current, old_variant = before["EndpointConfigName"], before["ProductionVariants"][0]["VariantName"]
    sagemaker.create_model(ModelName="faulty", ExecutionRoleArn="arn:aws:iam::1:role/r", PrimaryContainer={
        "Image": "byoc", "ModelDataUrl": f"file://{make_model(tmp_path, FAULTY)}"})
    config(sagemaker, "alarmed", "faulty", "Canary")
    cloudwatch.put_metric_alarm(
        AlarmName="canary-5xx", Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors", Statistic="Sum",
        Dimensions=[{"Name": "EndpointName", "Value": ENDPOINT}, {"Name": "VariantName", "Value": "Canary"}],
        Period=10, EvaluationPeriods=1, Threshold=0, ComparisonOperator="GreaterThanThreshold")
    with Load(gateway.url) as load:
        until(lambda: sum(load.served.values()) >= 3, timeout=60, what="load running")
        sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="alarmed", DeploymentConfig={
            "BlueGreenUpdatePolicy": {
                "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 120,
                                                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50}}},
            "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "canary-5xx"}]}})
        described = settled(sagemaker)
        failed, served = len(load.failures), sum(load.served.values())
        until(lambda: sum(load.served.values()) > served + 3, timeout=60, what="load after the rollback")
    assert described["EndpointStatus"] == "InService"
    assert described["EndpointConfigName"] == current
    assert "canary-5xx went into ALARM" in described["FailureReason"]
    # The canary's model failed the requests it took, each a ModelError carrying the model's 500 (the metric
    # counts that 500, not the client's 424); none failed once traffic was back on the old fleet.
    assert failed > 0 and all("ModelError" in f and "(500)" in f for f in load.failures)
    assert len(load.failures) == failed
    assert set(load.served) == {old_variant}  # no answer of the canary's reached a client
    alarm = cloudwatch.describe_alarms(AlarmNames=["canary-5xx"])["MetricAlarms"][0]
    assert alarm["StateValue"] == "ALARM"


def test_a_rolling_component_update_replaces_four_copies_one_at_a_time(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    sagemaker.create_endpoint_config(EndpointConfigName="hosting", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "ml.m5.xlarge", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="hosting", EndpointConfigName="hosting")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="hosting", WaiterConfig=WAIT)
    requirements = {"NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 128}
    sagemaker.create_inference_component(
        InferenceComponentName="rolled", EndpointName="hosting", VariantName="AllTraffic",
        Specification={"ModelName": "good", "ComputeResourceRequirements": requirements},
        RuntimeConfig={"CopyCount": 4})
    in_service = lambda: sagemaker.describe_inference_component(  # noqa: E731
        InferenceComponentName="rolled")["InferenceComponentStatus"] == "InService"
    until(in_service, timeout=180, what="the component InService")
    originals = set(running(gateway))
    samples: list[tuple[int, int]] = []  # (old copies, new copies) listed at once
    with Load(gateway.url, EndpointName="hosting", InferenceComponentName="rolled") as load:
        until(lambda: sum(load.served.values()) >= 3, timeout=60, what="load running")
        sagemaker.update_inference_component(
            InferenceComponentName="rolled",
            Specification={"ModelName": "good-2", "ComputeResourceRequirements": requirements},
            DeploymentConfig={"RollingUpdatePolicy": {
                "MaximumBatchSize": {"Type": "COPY_COUNT", "Value": 1}, "WaitIntervalInSeconds": 1}})

        def finished() -> bool:
            listed = set(running(gateway))
            samples.append((len(listed & originals), len(listed - originals)))
            return in_service() and not listed & originals

        until(finished, timeout=300, interval=0.1, what="the rolling update to finish")
    assert load.failures == []
    assert max(old + new for old, new in samples) <= 5  # one batch beside the four, never more
    assert {3, 2, 1} <= {old for old, _ in samples}  # the old copies left one at a time
    described = sagemaker.describe_inference_component(InferenceComponentName="rolled")
    assert described["Specification"]["ModelName"] == "good-2"
    assert described["RuntimeConfig"]["CurrentCopyCount"] == 4


def running(gateway: GatewayProcess) -> list[str]:
    copies = httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
    return [c["copy_id"] for c in copies if c["component"] == "rolled" and c["state"] != "Stopped"]
