"""Shadow variants and data capture as a user meets them: a gateway process, real copies of a TINY GGUF, boto3
for the control plane, the runtime and S3 (moto's server). The production variant and its shadow serve the same
weights under different names (HF_MODEL_ID), so every answer says which variant wrote it."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import TGI_IMAGE, WAIT, clients
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT, BUCKET = "shadowed", "captured"
AWS = {"region_name": "us-east-1", "aws_access_key_id": "x", "aws_secret_access_key": "x"}
CHAT = {"messages": [{"role": "user", "content": "What is deep learning?"}], "max_tokens": 4}
GENERATE = {"inputs": "What is deep learning?", "parameters": {"max_new_tokens": 4}}
CAPTURE = {"EnableCapture": True, "InitialSamplingPercentage": 100, "DestinationS3Uri": f"s3://{BUCKET}/data",
           "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
           "CaptureContentTypeHeader": {"JsonContentTypes": ["application/json"]}}
# SageMaker's layout: <prefix>/<endpoint>/<variant>/yyyy/mm/dd/hh/<mm>-<ss>-<ms>-<id>.jsonl
LAYOUT = re.compile(r"data/shadowed/(AllTraffic|Shadow)/\d{4}/\d{2}/\d{2}/\d{2}/\d{2}-\d{2}-\d{3}-[0-9a-f]+\.jsonl")


@pytest.fixture(scope="module")
def s3(s3_url: str) -> Any:
    client = boto3.client("s3", endpoint_url=s3_url, **AWS)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory, s3_url: str, s3: Any
            ) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_DEFAULT_REGION": "us-east-1", "PIER_CAPTURE_FLUSH_SECONDS": "0.3", "PIER_MAX_COPIES_PER_HOST": "4"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        for name, extra in (("prod", {}), ("shadow", {}), ("refusing", {"MAX_INPUT_TOKENS": "4"})):
            sagemaker.create_model(ModelName=name, PrimaryContainer={
                "Image": TGI_IMAGE, "ModelDataUrl": f"file://{folder / 'model'}",
                "Environment": {"HF_MODEL_ID": f"pier/{name}", "MAX_TOTAL_TOKENS": "512", **extra}})
        configure(sagemaker, "shadow-and-capture", "shadow", CAPTURE)
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="shadow-and-capture")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
        yield process


def configure(sagemaker: Any, name: str, shadow_model: str, capture: dict[str, Any]) -> None:
    variant = {"InstanceType": "local", "InitialInstanceCount": 1}
    sagemaker.create_endpoint_config(
        EndpointConfigName=name, DataCaptureConfig=capture,
        ProductionVariants=[{"VariantName": "AllTraffic", "ModelName": "prod", **variant}],
        ShadowProductionVariants=[{"VariantName": "Shadow", "ModelName": shadow_model, **variant}])


def chat(runtime: Any, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    reply = runtime.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps(CHAT),
                                    **extra)
    return json.loads(reply["Body"].read()), reply


def records(s3: Any) -> dict[str, list[dict[str, Any]]]:
    """Every captured record by variant, with each file's key checked against SageMaker's layout."""
    found: dict[str, list[dict[str, Any]]] = {"AllTraffic": [], "Shadow": []}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="data/"):
        for item in page.get("Contents", []):
            assert LAYOUT.fullmatch(item["Key"]), item["Key"]
            text = s3.get_object(Bucket=BUCKET, Key=item["Key"])["Body"].read().decode()
            found[item["Key"].split("/")[2]] += [json.loads(line) for line in text.splitlines()]
    return found


def served(gateway: GatewayProcess, variant: str) -> float:
    """Requests a variant's copies answered, as the copies count them (through the gateway's /metrics)."""
    return counted(gateway.url, "pier_http_requests_total", component=f"{ENDPOINT}/{variant}", route="/invocations")


def counted(url: str, name: str, **labels: str) -> float:
    """The sum of the samples of `url`'s /metrics named `name` whose labels include `labels`."""
    text = httpx.get(url + "/metrics", timeout=5).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


def test_describe_shows_the_shadow_and_the_capture(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    described = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
    assert [v["VariantName"] for v in described["ProductionVariants"]] == ["AllTraffic"]
    assert [v["VariantName"] for v in described["ShadowProductionVariants"]] == ["Shadow"]
    assert described["ShadowProductionVariants"][0]["CurrentInstanceCount"] == 1
    assert described["DataCaptureConfig"] == {"EnableCapture": True, "CaptureStatus": "Started",
                                              "CurrentSamplingPercentage": 100,
                                              "DestinationS3Uri": f"s3://{BUCKET}/data", "KmsKeyId": ""}
    config = sagemaker.describe_endpoint_config(EndpointConfigName="shadow-and-capture")
    assert config["DataCaptureConfig"]["CaptureOptions"] == CAPTURE["CaptureOptions"]
    assert config["ShadowProductionVariants"][0]["ModelName"] == "shadow"


def test_shadow_gets_the_traffic_and_captures_land_as_sagemaker_writes_them(gateway: GatewayProcess, s3: Any
                                                                            ) -> None:
    _, runtime = clients(gateway.url)
    before = served(gateway, "Shadow")
    answers = [chat(runtime, InferenceId=f"inference-{n}") for n in range(4)]
    for body, reply in answers:  # clients only ever see the production variant's answers
        assert body["model"] == "pier/prod"
        assert reply["InvokedProductionVariant"] == "AllTraffic"
    stream = runtime.invoke_endpoint_with_response_stream(
        EndpointName=ENDPOINT, ContentType="application/json", Body=json.dumps({**GENERATE, "stream": True}))
    streamed = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
    until(lambda: served(gateway, "Shadow") - before >= 5, timeout=60, what="the shadow to get all five requests")

    until(lambda: len(records(s3)["AllTraffic"]) >= 5 and len(records(s3)["Shadow"]) >= 5, timeout=30,
          what="the captured records in S3")
    captured = records(s3)
    by_id = {r["eventMetadata"]["eventId"]: r for r in captured["AllTraffic"]}
    for n, (body, reply) in enumerate(answers):
        record = by_id[reply["ResponseMetadata"]["RequestId"]]  # the eventId is the request's id
        assert record["eventVersion"] == "0"
        assert record["eventMetadata"]["inferenceId"] == f"inference-{n}"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", record["eventMetadata"]["inferenceTime"])
        sent, answered = record["captureData"]["endpointInput"], record["captureData"]["endpointOutput"]
        assert sent == {"observedContentType": "application/json", "mode": "INPUT", "data": json.dumps(CHAT),
                        "encoding": "JSON"}
        assert answered["mode"] == "OUTPUT" and answered["encoding"] == "JSON"
        assert json.loads(answered["data"]) == body

    streams = [r for r in captured["AllTraffic"] if "stream" in r["captureData"]["endpointInput"]["data"]]
    assert len(streams) == 1  # a streamed answer is captured whole, as the client assembled it
    output = streams[0]["captureData"]["endpointOutput"]
    assert output["encoding"] == "BASE64"  # not a JSON content type: kept as bytes
    assert base64.b64decode(output["data"]) == streamed

    shadow_models = {json.loads(r["captureData"]["endpointOutput"]["data"]).get("model")
                     for r in captured["Shadow"] if "messages" in r["captureData"]["endpointInput"]["data"]}
    assert shadow_models == {"pier/shadow"}  # the shadow answered; only the capture kept its answers

    # The shadow's own AWS/SageMaker metrics, beside production's; and the capture writer's count.
    assert counted(gateway.url, "pier_sagemaker_invocations_total", endpoint=ENDPOINT, variant="Shadow") == 5
    assert counted(gateway.url, "pier_sagemaker_invocations_total", endpoint=ENDPOINT, variant="AllTraffic") == 5
    assert counted(gateway.url, "pier_data_capture_records_total", outcome="written") >= 10
    assert invocations(gateway, "Shadow") == invocations(gateway, "AllTraffic") == 5  # in CloudWatch too


def invocations(gateway: GatewayProcess, variant: str) -> float:
    """The variant's AWS/SageMaker Invocations over the last five minutes, through CloudWatch's API."""
    cloudwatch = boto3.client("cloudwatch", endpoint_url=gateway.url, **AWS)
    now = time.time()
    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName="Invocations", StartTime=now - 300, EndTime=now + 1, Period=300,
        Statistics=["Sum"], Dimensions=[{"Name": "EndpointName", "Value": ENDPOINT},
                                        {"Name": "VariantName", "Value": variant}])["Datapoints"]
    return sum(p["Sum"] for p in points)


def test_update_endpoint_stops_capture_and_a_failing_shadow_fails_no_client(gateway: GatewayProcess, s3: Any
                                                                            ) -> None:
    sagemaker, runtime = clients(gateway.url)
    configure(sagemaker, "refusing-shadow", "refusing", {**CAPTURE, "EnableCapture": False})
    sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="refusing-shadow")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
    assert sagemaker.describe_endpoint(EndpointName=ENDPOINT)["DataCaptureConfig"]["CaptureStatus"] == "Stopped"
    until(lambda: len(shadow_copies(gateway)) == 1, timeout=60, what="the old shadow copy gone")
    captured_before = {variant: len(found) for variant, found in records(s3).items()}
    refused_before = _shadow_errors(gateway)

    for _ in range(5):  # the shadow refuses every one of these prompts (over its MAX_INPUT_TOKENS)
        body, reply = chat(runtime)
        assert body["model"] == "pier/prod" and reply["ResponseMetadata"]["HTTPStatusCode"] == 200
    until(lambda: _shadow_errors(gateway) - refused_before >= 5, timeout=60, what="the shadow's 5 refusals counted")
    assert {variant: len(found) for variant, found in records(s3).items()} == captured_before  # capture is off


def shadow_copies(gateway: GatewayProcess) -> list[dict[str, Any]]:
    """The Shadow variant's copies, of whichever fleet: an UpdateEndpoint runs the new config's variants as
    `<endpoint>/<variant>@N` (pier.control.deployment)."""
    listed = httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
    return [c for c in listed if c["component"].partition("@")[0] == f"{ENDPOINT}/Shadow"
            and c["state"] != "Stopped"]


def _shadow_errors(gateway: GatewayProcess) -> float:
    return counted(gateway.url, "pier_sagemaker_invocation_errors_total", endpoint=ENDPOINT, variant="Shadow")


def test_capture_to_a_folder_on_the_host_input_only(gateway: GatewayProcess, tmp_path: Path) -> None:
    sagemaker, runtime = clients(gateway.url)
    capture = {"InitialSamplingPercentage": 100, "DestinationS3Uri": f"file://{tmp_path}/captured",
               "CaptureOptions": [{"CaptureMode": "Input"}],
               "CaptureContentTypeHeader": {"CsvContentTypes": ["text/csv"]}}
    configure(sagemaker, "to-a-folder", "shadow", capture)
    sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName="to-a-folder")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
    body, reply = chat(runtime)
    assert body["model"] == "pier/prod"

    files = until(lambda: sorted((tmp_path / "captured" / ENDPOINT / "AllTraffic").rglob("*.jsonl")), timeout=30,
                  what="a capture file in the folder")
    assert re.fullmatch(r"\d{4}/\d{2}/\d{2}/\d{2}/\d{2}-\d{2}-\d{3}-[0-9a-f]+\.jsonl",
                        str(files[0].relative_to(tmp_path / "captured" / ENDPOINT / "AllTraffic")))
    record = json.loads(files[0].read_text().splitlines()[0])
    assert record["captureData"] == {"endpointInput": {  # JSON is not among the config's text types: base64
        "observedContentType": "application/json", "mode": "INPUT", "encoding": "BASE64",
        "data": base64.b64encode(json.dumps(CHAT).encode()).decode()}}
    assert record["eventMetadata"]["eventId"] == reply["ResponseMetadata"]["RequestId"]


def test_a_stalled_shadow_holds_up_no_client(gateway: GatewayProcess) -> None:
    """The shadow's copy frozen (SIGSTOP): its requests hang until their deadline (about a minute), the clients'
    answers come from production as fast as ever."""
    _, runtime = clients(gateway.url)
    shadow = shadow_copies(gateway)[0]
    os.kill(shadow["pid"], signal.SIGSTOP)
    try:
        for _ in range(5):
            started = time.monotonic()
            body, reply = chat(runtime)
            assert body["model"] == "pier/prod" and reply["InvokedProductionVariant"] == "AllTraffic"
            assert time.monotonic() - started < 10  # not the shadow's minute
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(shadow["pid"], signal.SIGCONT)
