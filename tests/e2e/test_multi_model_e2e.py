"""A multi-model endpoint as a SageMaker user meets it: five models under one S3 prefix (moto's S3 server), three
as model.tar.gz and two as bare GGUFs, served by one copy of a real `pier up` process whose models may take the
memory of two; boto3 for the control plane, the runtime and CloudWatch."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from pier.server.multi_model.app import footprint
from pier.server.settings import ServerSettings
from pier.synthetic.builder import TINY, build_gguf
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT, PAIR = "many", "pair"
MODELS = ["m0.tar.gz", "m1.tar.gz", "m2.tar.gz", "m3.gguf", "m4.gguf"]
ENVIRONMENT = {"MAX_TOTAL_TOKENS": "512"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, s3_url: str) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("mme")
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1", aws_access_key_id="x",
                      aws_secret_access_key="x")
    s3.create_bucket(Bucket="mme")
    sizes = []
    for seed, name in enumerate(MODELS):
        gguf = build_gguf(folder / f"{seed}.gguf", TINY, quant="Q8_0", seed=seed, name=f"model-{seed}")
        sizes.append(footprint(ServerSettings.from_env(ENVIRONMENT), gguf))
        if name.endswith(".gguf"):
            s3.upload_file(str(gguf), "mme", f"prefix/{name}")
        else:
            archive = io.BytesIO()
            with tarfile.open(fileobj=archive, mode="w:gz") as tar:
                tar.add(gguf, arcname="model.gguf")
            s3.put_object(Bucket="mme", Key=f"prefix/{name}", Body=archive.getvalue())
    local = folder / "local"  # a file:// prefix too: one model in an archive, one bare GGUF
    local.mkdir()
    with tarfile.open(local / "m0.tar.gz", mode="w:gz") as tar:
        tar.add(folder / "0.gguf", arcname="model.gguf")
    (local / "m1.gguf").symlink_to(folder / "1.gguf")
    room_mb = 2.5 * max(sizes) / 2**20  # two models fit, never three
    env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_DEFAULT_REGION": "us-east-1"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        sagemaker.create_model(ModelName="many", PrimaryContainer={
            "Mode": "MultiModel", "ModelDataUrl": "s3://mme/prefix/",
            "MultiModelConfig": {"ModelCacheSetting": "Enabled"},
            "Environment": {**ENVIRONMENT, "PIER_MULTI_MODEL_MEMORY_MB": f"{room_mb:.3f}"}})
        sagemaker.create_endpoint_config(EndpointConfigName="many", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "many", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="many")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
        sagemaker.create_model(ModelName="pair", PrimaryContainer={
            "Mode": "MultiModel", "ModelDataUrl": f"file://{local}/", "Environment": ENVIRONMENT})
        sagemaker.create_endpoint_config(EndpointConfigName="pair", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "pair", "InstanceType": "local", "InitialInstanceCount": 2,
            "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}}])
        sagemaker.create_endpoint(EndpointName=PAIR, EndpointConfigName="pair")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=PAIR, WaiterConfig=WAIT)
        yield process


def invoke(gateway: GatewayProcess, target: str, endpoint: str = ENDPOINT) -> str:
    _, runtime = clients(gateway.url)
    reply = runtime.invoke_endpoint(EndpointName=endpoint, TargetModel=target, ContentType="application/json",
                                    Body=json.dumps({"inputs": "the cat", "parameters": {"max_new_tokens": 4}}))
    text: str = json.loads(reply["Body"].read())[0]["generated_text"]
    return text


def statistics(gateway: GatewayProcess, metric: str, endpoint: str = ENDPOINT) -> dict[str, float]:
    cloudwatch = boto3.client("cloudwatch", endpoint_url=gateway.url, region_name="us-east-1",
                              aws_access_key_id="x", aws_secret_access_key="x")
    now = datetime.now(UTC)
    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName=metric, StartTime=now - timedelta(hours=1), EndTime=now + timedelta(
            minutes=1), Period=3600, Statistics=["Sum", "SampleCount", "Maximum"],
        Dimensions=[{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}],
    )["Datapoints"]
    return {k: sum(p[k] for p in points) if k != "Maximum" else max((p[k] for p in points), default=0.0)
            for k in ("Sum", "SampleCount", "Maximum")}


def test_five_models_with_room_for_two(gateway: GatewayProcess) -> None:
    description = clients(gateway.url)[0].describe_model(ModelName="many")["PrimaryContainer"]
    assert description["Mode"] == "MultiModel" and description["MultiModelConfig"] == {"ModelCacheSetting": "Enabled"}
    # In order: m0 and m1 load; m0 hits; m2 evicts m1 (the least recently used), which then evicts m0; m1 hits.
    order = ["m0.tar.gz", "m1.tar.gz", "m0.tar.gz", "m2.tar.gz", "m1.tar.gz", "m1.tar.gz", "m3.gguf", "m4.gguf"]
    answers = {target: invoke(gateway, target) for target in order}
    assert all(answers.values())
    assert len(set(answers.values())) > 1  # five different models, not one answering for all
    until(lambda: statistics(gateway, "ModelCacheHit")["SampleCount"] == len(order), timeout=30,
          what="ModelCacheHit for every call")
    hits = statistics(gateway, "ModelCacheHit")
    assert hits["Sum"] == 2
    assert statistics(gateway, "ModelLoadingWaitTime")["SampleCount"] == 6
    assert statistics(gateway, "LoadedModelCount")["Maximum"] == 2
    assert statistics(gateway, "ModelUnloadingTime")["SampleCount"] == 4  # m2, m1, m3, m4 each unloaded one
    # The archives, unpacked on their first load (m1's second load reads its unpacked files).
    assert statistics(gateway, "ModelDownloadingTime")["SampleCount"] == 3

    # Every model at once, more calls than room: each call waits for its model, none fails.
    targets = MODELS * 4
    with ThreadPoolExecutor(4) as pool:
        texts = list(pool.map(lambda t: invoke(gateway, t), targets))
    assert all(texts)
    until(lambda: statistics(gateway, "ModelCacheHit")["SampleCount"] == len(order) + len(targets), timeout=30,
          what="ModelCacheHit for every call")
    assert statistics(gateway, "LoadedModelCount")["Maximum"] == 2


def test_unknown_target_is_refused_as_aws_refuses_it(gateway: GatewayProcess) -> None:
    with pytest.raises(ClientError) as refused:
        invoke(gateway, "missing.tar.gz")
    error: Any = refused.value.response
    assert error["Error"]["Code"] == "ValidationError"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Message"].startswith(
        "Failed to download model data(bucket: mme, key: prefix/missing.tar.gz). Please ensure that there is an "
        "object located at the URL")


def test_a_call_without_target_is_refused(gateway: GatewayProcess) -> None:
    _, runtime = clients(gateway.url)
    with pytest.raises(ClientError) as refused:
        runtime.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=b'{"inputs": "x"}')
    assert refused.value.response["Error"]["Code"] == "ValidationError"
    assert "is missing a target model header" in refused.value.response["Error"]["Message"]


def test_a_target_goes_to_the_copy_that_holds_it(gateway: GatewayProcess) -> None:
    """Two copies, two models from a local prefix: each model loads on one copy once, and every later call for it
    goes there (least outstanding requests alone would alternate the copies and load each model on both)."""
    for target in ["m0.tar.gz"] * 4 + ["m1.gguf"] * 4:
        assert invoke(gateway, target, PAIR)
    until(lambda: statistics(gateway, "ModelCacheHit", PAIR)["SampleCount"] == 8, timeout=30,
          what="ModelCacheHit for every call")
    assert statistics(gateway, "ModelCacheHit", PAIR)["Sum"] == 6
    assert statistics(gateway, "ModelLoadingWaitTime", PAIR)["SampleCount"] == 2
