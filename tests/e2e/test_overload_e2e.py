"""Overload on real copies, through a `pier up` gateway process: an inference component of two copies of a TINY
GGUF, each started with MAX_CONCURRENT_REQUESTS=1, behind a queue of two. Many requests at once through boto3 and
the openai client: each is answered or throttled (ThrottlingException / 429), never a 424 ModelError, and the
copies' own metrics show that none was ever sent more than it takes (a copy past its limit answers 429 itself).
The same gateway refuses the calls SageMaker refuses, in SageMaker's words."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.gateway.targets import COMPONENT_NOT_ALLOWED, COMPONENT_REQUIRED
from tests.e2e.gateway_process import GatewayProcess
from tests.server.processes import copy_metric
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

WAIT = {"Delay": 1, "MaxAttempts": 120}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}
OK = "ok"
THROTTLED = (429, "ThrottlingException")
# A completion long enough that requests overlap (the TINY model's random weights never stop it early).
LONG = {"prompt": "the quick brown fox", "max_tokens": 200, "ignore_eos": True}


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("overload")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    env = {**FAKE_AWS, "PIER_QUEUE_SIZE": "2", "PIER_QUEUE_TIMEOUT_SECONDS": "30"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        process.wait_ready()
        _deploy(process.url, folder / "model")
        yield process.url


def _deploy(url: str, model_dir: Path) -> None:
    sagemaker = boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                             aws_secret_access_key="x")
    sagemaker.create_model(ModelName="tiny", PrimaryContainer={
        "Image": "pier", "ModelDataUrl": f"file://{model_dir}",
        "Environment": {"MAX_CONCURRENT_REQUESTS": "1", "PIER_PARALLEL": "2"}})
    sagemaker.create_endpoint_config(EndpointConfigName="classic", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "tiny", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="classic", EndpointConfigName="classic")
    sagemaker.create_endpoint_config(EndpointConfigName="busy", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="busy", EndpointConfigName="busy")
    for name in ("classic", "busy"):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=WAIT)
    sagemaker.create_inference_component(
        InferenceComponentName="busy-tiny", EndpointName="busy", VariantName="AllTraffic",
        Specification={"ModelName": "tiny", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 2})
    for _ in range(240):
        copies = _copies(url)
        if len(copies) == 2 and all(c["state"] == "Ready" for c in copies):
            return
        __import__("time").sleep(0.5)
    raise AssertionError(f"copies not ready: {_copies(url)}")


def _copies(url: str) -> list[dict[str, Any]]:
    return [c for c in httpx.get(f"{url}/pier/copies").json()["copies"] if c["component"] == "busy-tiny"]


def runtime(url: str) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1}, read_timeout=60))


def boto3_call(url: str) -> object:
    try:
        runtime(url).invoke_endpoint(EndpointName="busy", InferenceComponentName="busy-tiny",
                                     ContentType="application/json", Body=json.dumps(LONG))["Body"].read()
        return OK
    except ClientError as error:
        return error.response["ResponseMetadata"]["HTTPStatusCode"], error.response["Error"]["Code"]


def openai_call(url: str) -> object:
    api = openai.OpenAI(base_url=f"{url}/endpoints/busy/inference-components/busy-tiny/openai/v1",
                        api_key="unused", max_retries=0, timeout=60)
    try:
        api.completions.create(model="tiny", prompt=LONG["prompt"], max_tokens=200,  # type: ignore[arg-type]
                               extra_body={"ignore_eos": True})
        return OK
    except openai.APIStatusError as error:
        assert error.status_code != 429 or error.response.headers["retry-after"] == "1"
        return error.status_code, "ThrottlingException" if error.status_code == 429 else error.message


def served(url: str, route: str, status: str) -> float:
    return sum(copy_metric(url, c, "pier_http_requests_total", route=route, status=status) for c in _copies(url))


@pytest.mark.parametrize(("call", "route"), [(boto3_call, "/invocations"), (openai_call, "/v1/completions")],
                         ids=["boto3", "openai"])
def test_overload_is_a_throttle_and_no_copy_takes_more_than_it_can(gateway: str, call: Callable[[str], object],
                                                                   route: str) -> None:
    before = served(gateway, route, "200")
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda _: call(gateway), range(16)))
    assert set(map(str, outcomes)) <= {str(OK), str(THROTTLED)}, outcomes  # never a 424, nor anything else
    assert outcomes.count(OK) >= 4 and outcomes.count(THROTTLED) >= 1, outcomes  # 2 copies + 2 queued at least
    assert served(gateway, route, "429") == 0  # a copy sent more than MAX_CONCURRENT_REQUESTS would have said so
    assert served(gateway, route, "200") - before == outcomes.count(OK)
    assert {c["concurrency"] for c in _copies(gateway)} == {1}  # what the gateway knows of each copy


def test_component_names_are_checked_as_sagemaker_checks_them(gateway: str) -> None:
    for parameters, message in (({"EndpointName": "busy"}, COMPONENT_REQUIRED),
                                ({"EndpointName": "classic", "InferenceComponentName": "busy-tiny"},
                                 COMPONENT_NOT_ALLOWED)):
        with pytest.raises(ClientError) as raised:
            runtime(gateway).invoke_endpoint(Body=json.dumps(LONG), **parameters)
        error = raised.value.response
        assert (error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"], error["Error"]["Message"]) == (
            400, "ValidationError", message)
    answer = runtime(gateway).invoke_endpoint(EndpointName="classic", Body=json.dumps({**LONG, "max_tokens": 2}),
                                              ContentType="application/json")
    assert json.loads(answer["Body"].read())["choices"]
