"""Asynchronous inference end to end: a `pier up` gateway process with a copy of a TINY GGUF, moto's S3 server, and
the clients people use (boto3's invoke_endpoint_async, the sagemaker SDK's AsyncPredictor, CloudWatch).

The gateway's real-time limit is 5 s (PIER_INVOCATION_TIMEOUT_SECONDS) so that a generation longer than that shows
asynchronous requests are not held to it. One gateway serves the module's tests in order.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

WAIT = {"Delay": 0.5, "MaxAttempts": 240}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
BUCKET = "async"
REAL_TIME_LIMIT_S = 5


def generate(tokens: int, prompt: str = "the quick brown fox") -> bytes:
    return json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": tokens, "ignore_eos": True}}).encode()


def aws(url: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture(scope="module")
def s3(s3_url: str) -> Any:
    client = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1", aws_access_key_id="x",
                          aws_secret_access_key="x")
    client.create_bucket(Bucket=BUCKET)
    client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})  # writes counted
    return client


class Hooks(BaseHTTPRequestHandler):
    """An HTTP callback: what pier POSTs to an ErrorTopic given as a URL."""

    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        self.received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def hooks() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Hooks)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/hook"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory, s3_url: str, s3: Any, hooks: str
            ) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("async")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    env = {**FAKE_AWS, "AWS_ENDPOINT_URL_S3": s3_url, "PIER_INVOCATION_TIMEOUT_SECONDS": str(REAL_TIME_LIMIT_S),
           "PIER_AUTOSCALING_INTERVAL_S": "0.5", "PIER_AUTOSCALING_WINDOW_S": "2"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        process.wait_ready()
        _deploy(process.url, folder / "model", hooks)
        yield process


def _deploy(url: str, model_dir: Path, hooks: str) -> None:
    sagemaker = aws(url, "sagemaker")
    sagemaker.create_model(ModelName="tiny", PrimaryContainer={
        "Image": "pier", "ModelDataUrl": f"file://{model_dir}",
        "Environment": {"PIER_PARALLEL": "2", "MAX_TOTAL_TOKENS": "8192"}})
    sagemaker.create_endpoint_config(
        EndpointConfigName="tiny-async",
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "tiny", "InstanceType": "local",
                             "InitialInstanceCount": 1}],
        AsyncInferenceConfig={
            "OutputConfig": {"S3OutputPath": f"s3://{BUCKET}/out", "S3FailurePath": f"s3://{BUCKET}/failed",
                             "NotificationConfig": {"SuccessTopic": "arn:aws:sns:us-east-1:123456789012:done",
                                                    "ErrorTopic": hooks}},
            "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1}})
    sagemaker.create_endpoint(EndpointName="tiny-async", EndpointConfigName="tiny-async")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="tiny-async", WaiterConfig=WAIT)


def put(s3: Any, key: str, body: bytes) -> str:
    s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return f"s3://{BUCKET}/{key}"


def fetch(s3: Any, url: str, timeout: float = 120.0) -> bytes:
    """The object at `url` once it is there."""
    key = url.removeprefix(f"s3://{BUCKET}/")
    deadline = time.monotonic() + timeout
    while True:
        try:
            data: bytes = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            return data
        except ClientError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing at {url} after {timeout} s") from None
            time.sleep(0.25)


def test_the_endpoint_config_and_endpoint_describe_their_async_config(gateway: GatewayProcess) -> None:
    sagemaker = aws(gateway.url, "sagemaker")
    config = sagemaker.describe_endpoint_config(EndpointConfigName="tiny-async")["AsyncInferenceConfig"]
    assert config["ClientConfig"] == {"MaxConcurrentInvocationsPerInstance": 1}
    assert sagemaker.describe_endpoint(EndpointName="tiny-async")["AsyncInferenceConfig"] == config


def test_invoke_endpoint_async_writes_the_answer_where_it_says(gateway: GatewayProcess, s3: Any) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    started = time.monotonic()
    reply = runtime.invoke_endpoint_async(EndpointName="tiny-async", ContentType="application/json",
                                          InputLocation=put(s3, "in/one.json", generate(8)), InferenceId="first")
    assert time.monotonic() - started < 2  # accepted at once, not answered
    assert reply["ResponseMetadata"]["HTTPStatusCode"] == 202
    assert reply["InferenceId"] == "first"
    assert re.fullmatch(rf"s3://{BUCKET}/out/[0-9a-f-]{{36}}\.out", reply["OutputLocation"])
    assert re.fullmatch(rf"s3://{BUCKET}/failed/[0-9a-f-]{{36}}-error\.out", reply["FailureLocation"])
    answer = json.loads(fetch(s3, reply["OutputLocation"]))
    assert answer[0]["generated_text"]
    assert "notifying arn:aws:sns:us-east-1:123456789012:done" in gateway.output()


def test_a_missing_input_goes_to_the_failure_location_with_the_reason(gateway: GatewayProcess, s3: Any) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    reply = runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=f"s3://{BUCKET}/in/nothing.json")
    reason = fetch(s3, reply["FailureLocation"]).decode()
    assert f"Cannot read s3://{BUCKET}/in/nothing.json" in reason and "NoSuchKey" in reason
    notice = until(lambda: next((n for n in Hooks.received if n["inferenceId"] == reply["InferenceId"]), None), 10,
                   "the error notification")
    assert notice["invocationStatus"] == "Failed" and notice["failureReason"] == reason
    assert notice["responseParameters"] == {"failureLocation": reply["FailureLocation"]}


def test_a_filename_that_names_an_earlier_answer_is_still_run(gateway: GatewayProcess, s3: Any) -> None:
    """Issue 41: a request whose X-Amzn-SageMaker-Filename named an existing answer never ran (taken as answered
    before a restart), and its caller read the earlier caller's answer. Both run: two writes of the object."""
    runtime = aws(gateway.url, "sagemaker-runtime")
    location = put(s3, "in/named.json", generate(4))
    first = runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=location, InferenceId="named-1",
                                          ContentType="application/json", Filename="named.json")
    assert first["OutputLocation"] == f"s3://{BUCKET}/out/named.json"
    fetch(s3, first["OutputLocation"])
    second = runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=location, InferenceId="named-2",
                                           ContentType="application/json", Filename="named.json")
    until(lambda: "named-2 done" in gateway.output(), 60, "the second request answered")
    versions = s3.list_object_versions(Bucket=BUCKET, Prefix="out/named.json").get("Versions", [])
    assert len(versions) == 2 and second["OutputLocation"] == first["OutputLocation"]


def test_bad_calls_are_validation_errors(gateway: GatewayProcess) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    with pytest.raises(ClientError, match=r"requestTTLSeconds.*less than or equal to 21600"):  # botocore checks mins
        runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=f"s3://{BUCKET}/x",
                                      RequestTTLSeconds=99999)
    with pytest.raises(ClientError, match=r"of account .* not found"):
        runtime.invoke_endpoint_async(EndpointName="nothing-here", InputLocation=f"s3://{BUCKET}/x")


def test_a_generation_longer_than_the_real_time_limit_succeeds_asynchronously(gateway: GatewayProcess,
                                                                              s3: Any) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    body = generate(6000)
    started = time.monotonic()
    with pytest.raises(ClientError, match="ModelError"):  # in real time the gateway's 5 s limit ends it
        runtime.invoke_endpoint(EndpointName="tiny-async", ContentType="application/json", Body=body)
    assert time.monotonic() - started < REAL_TIME_LIMIT_S + 2
    reply = runtime.invoke_endpoint_async(EndpointName="tiny-async", ContentType="application/json",
                                          InputLocation=put(s3, "in/long.json", body))
    started = time.monotonic()
    answer = json.loads(fetch(s3, reply["OutputLocation"], timeout=180))
    took = time.monotonic() - started
    assert took > REAL_TIME_LIMIT_S, f"the generation took only {took:.1f} s: make it longer"
    assert answer[0]["generated_text"]


def test_backlog_metrics_are_in_cloudwatch(gateway: GatewayProcess, s3: Any) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    location = put(s3, "in/backlog.json", generate(400))
    replies = [runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=location,
                                             ContentType="application/json") for _ in range(4)]
    for reply in replies:
        fetch(s3, reply["OutputLocation"])
    cloudwatch = aws(gateway.url, "cloudwatch")
    now = time.time()

    def peak(name: str) -> float:
        points = cloudwatch.get_metric_statistics(
            Namespace="AWS/SageMaker", MetricName=name, Dimensions=[{"Name": "EndpointName", "Value": "tiny-async"}],
            StartTime=now - 120, EndTime=now + 60, Period=60, Statistics=["Maximum"])["Datapoints"]
        return max((p["Maximum"] for p in points), default=-1.0)

    assert peak("ApproximateBacklogSize") >= 3  # one runs at a time (MaxConcurrentInvocationsPerInstance 1)
    assert peak("ApproximateBacklogSizePerInstance") >= 3
    assert peak("ApproximateAgeOfOldestRequest") > 0
    assert peak("HasBacklogWithoutCapacity") == 0  # the copy was there all along
    names = {m["MetricName"] for m in cloudwatch.list_metrics(Namespace="AWS/SageMaker")["Metrics"]}
    assert {"ApproximateBacklogSize", "ApproximateBacklogSizePerInstance", "ApproximateAgeOfOldestRequest",
            "HasBacklogWithoutCapacity"} <= names


def test_a_gateway_restart_mid_queue_runs_each_request_once(gateway: GatewayProcess, s3: Any) -> None:
    runtime = aws(gateway.url, "sagemaker-runtime")
    location = put(s3, "in/restart.json", generate(300))
    replies = [runtime.invoke_endpoint_async(EndpointName="tiny-async", InputLocation=location,
                                             ContentType="application/json", InferenceId=f"restart-{i}")
               for i in range(5)]
    fetch(s3, replies[0]["OutputLocation"])  # the first is done; the others wait or run
    gateway.stop()
    again = GatewayProcess(gateway.state_dir, gateway.port, gateway.log.with_name("restarted.log"), gateway.env)
    gateway.process = again.process  # the module's fixture stops whichever runs last
    again.wait_ready()
    for reply in replies:
        assert json.loads(fetch(s3, reply["OutputLocation"], timeout=180))[0]["generated_text"]
    for reply in replies:  # each answer written once: one version of its object
        key = reply["OutputLocation"].removeprefix(f"s3://{BUCKET}/")
        versions = s3.list_object_versions(Bucket=BUCKET, Prefix=key).get("Versions", [])
        assert len(versions) == 1, f"{reply['InferenceId']} was answered {len(versions)} times"
    after = again.output()
    assert any(f"restart-{i} done" in after for i in range(1, 5)), "nothing was left for the restarted gateway"


def test_the_sagemaker_sdks_async_predictor(gateway: GatewayProcess, s3_url: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    sagemaker_sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")
    from sagemaker.async_inference import WaiterConfig
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.predictor import Predictor
    from sagemaker.predictor_async import AsyncPredictor
    from sagemaker.serializers import JSONSerializer

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_url)  # the SDK's own S3 client finds moto's server so
    session = sagemaker_sdk.Session(
        boto_session=boto3.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"),
        sagemaker_client=aws(gateway.url, "sagemaker"), sagemaker_runtime_client=aws(gateway.url, "sagemaker-runtime"))
    predictor = AsyncPredictor(Predictor("tiny-async", sagemaker_session=session, serializer=JSONSerializer(),
                                         deserializer=JSONDeserializer()))
    answer = predictor.predict({"inputs": "hello", "parameters": {"max_new_tokens": 8}},
                               input_path=f"s3://{BUCKET}/in/sdk.json",
                               waiter_config=WaiterConfig(max_attempts=120, delay=1))
    assert answer[0]["generated_text"]


SCALED = {"ServiceNamespace": "sagemaker", "ResourceId": "endpoint/scaled/variant/AllTraffic",
          "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}


def instances(sagemaker: Any) -> tuple[int, int]:
    """The scaled variant's (desired, current) instances."""
    variant = sagemaker.describe_endpoint(EndpointName="scaled")["ProductionVariants"][0]
    return variant.get("DesiredInstanceCount", -1), variant.get("CurrentInstanceCount", -1)


def test_the_backlog_scales_instances_from_zero_and_back(gateway: GatewayProcess, s3: Any) -> None:
    """AWS's recipe for asynchronous endpoints: target tracking on ApproximateBacklogSizePerInstance with
    MinCapacity 0. pier starts the first instance as soon as work waits (AWS: an alarm on HasBacklogWithoutCapacity)."""
    sagemaker, scaling = aws(gateway.url, "sagemaker"), aws(gateway.url, "application-autoscaling")
    sagemaker.create_endpoint(EndpointName="scaled", EndpointConfigName="tiny-async")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="scaled", WaiterConfig=WAIT)
    scaling.register_scalable_target(**SCALED, MinCapacity=0, MaxCapacity=2)
    scaling.put_scaling_policy(
        PolicyName="backlog", PolicyType="TargetTrackingScaling", **SCALED,
        TargetTrackingScalingPolicyConfiguration={
            "CustomizedMetricSpecification": {
                "MetricName": "ApproximateBacklogSizePerInstance", "Namespace": "AWS/SageMaker",
                "Dimensions": [{"Name": "EndpointName", "Value": "scaled"}], "Statistic": "Average"},
            "TargetValue": 1, "ScaleOutCooldown": 5, "ScaleInCooldown": 8})
    until(lambda: instances(sagemaker) == (0, 0), 60, "scaled in to zero with no backlog")
    runtime = aws(gateway.url, "sagemaker-runtime")
    location = put(s3, "in/scaled.json", generate(200))
    replies = [runtime.invoke_endpoint_async(EndpointName="scaled", InputLocation=location,
                                             ContentType="application/json") for _ in range(8)]
    until(lambda: instances(sagemaker)[1] == 2, 120, "two instances for the backlog")
    for reply in replies:
        assert json.loads(fetch(s3, reply["OutputLocation"], timeout=180))[0]["generated_text"]
    until(lambda: instances(sagemaker) == (0, 0), 90, "back to zero once the backlog is done")
    causes = [a["Cause"] for a in scaling.describe_scaling_activities(ServiceNamespace="sagemaker",
                                                                       ResourceId=SCALED["ResourceId"])["ScalingActivities"]]
    assert any("ApproximateBacklogSizePerInstance" in c and "above the target" in c for c in causes)
    assert any("had no copies" in c for c in causes)  # the wake from zero
