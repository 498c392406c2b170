"""The whole of pier as a user meets it: a gateway process, real copies on a TINY GGUF, and the clients
people already use (boto3 exactly as the seeds do, the sagemaker SDK's Predictor, OpenAI's routes).

One gateway serves the module's tests in order: a classic endpoint, an endpoint with an inference
component of two copies, a copy killed with SIGKILL, a gateway restart, deletes.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config

from tests.e2e.gateway_process import GatewayProcess
from tests.server.processes import copy_metric
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

WAIT = {"Delay": 1, "MaxAttempts": 120}
TGI_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:2.1-tgi2.0-gpu-py310"
GENERATE = {"inputs": "What is deep learning?", "parameters": {"max_new_tokens": 8, "do_sample": True,
                                                                "temperature": 0.9, "top_p": 0.6}}
MESSAGES = {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "What is deep learning?"}], "max_tokens": 8}


@pytest.fixture(scope="module")
def model_dir(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "model.gguf").symlink_to(tiny_gguf)
    return folder


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, s3_url: str) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    env = {"AWS_ENDPOINT_URL_S3": s3_url, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_DEFAULT_REGION": "us-east-1"}
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", env) as process:
        yield process.wait_ready()


def clients(url: str) -> tuple[Any, Any]:
    """boto3 exactly as a SageMaker user has it, only the endpoint URL changed."""
    settings = {"endpoint_url": url, "region_name": "us-east-1", "aws_access_key_id": "x",
                "aws_secret_access_key": "x"}
    return (boto3.client("sagemaker", **settings),
            boto3.client("sagemaker-runtime", **settings, config=Config(retries={"max_attempts": 5})))


def copies(url: str, component: str) -> list[dict[str, Any]]:
    return [c for c in httpx.get(f"{url}/pier/copies").json()["copies"] if c["component"] == component]


def invoke(runtime: Any, endpoint: str, payload: dict[str, Any], **extra: Any) -> Any:
    reply = runtime.invoke_endpoint(EndpointName=endpoint, ContentType="application/json",
                                    Body=json.dumps(payload), **extra)
    return json.loads(reply["Body"].read())


def test_classic_endpoint_with_boto3_as_the_seeds_do(gateway: GatewayProcess, model_dir: Path) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_model(ModelName="llama-tiny", ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"Image": TGI_IMAGE, "ModelDataUrl": f"file://{model_dir}",
                                             "Environment": {"HF_MODEL_ID": "pier/tiny", "MAX_TOTAL_TOKENS": "512",
                                                             "MESSAGES_API_ENABLED": "true"}})
    sagemaker.create_endpoint_config(EndpointConfigName="llama-tiny-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "llama-tiny", "InstanceType": "local",
        "InitialInstanceCount": 1, "ContainerStartupHealthCheckTimeoutInSeconds": 900}])
    sagemaker.create_endpoint(EndpointName="llama-tiny", EndpointConfigName="llama-tiny-config")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="llama-tiny", WaiterConfig=WAIT)

    generated = invoke(runtime, "llama-tiny", GENERATE)
    assert isinstance(generated[0]["generated_text"], str) and generated[0]["generated_text"]
    chat = invoke(runtime, "llama-tiny", MESSAGES)
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["model"] == "pier/tiny"  # the TGI environment reached the copy

    stream = runtime.invoke_endpoint_with_response_stream(
        EndpointName="llama-tiny", ContentType="application/json", Body=json.dumps({**GENERATE, "stream": True}))
    parts = b"".join(event["PayloadPart"]["Bytes"] for event in stream["Body"])
    events = [json.loads(line.removeprefix(b"data:")) for line in parts.split(b"\n\n") if line.strip()]
    assert len(events) == 8 and events[-1]["generated_text"]

    described = sagemaker.describe_endpoint(EndpointName="llama-tiny")
    assert described["EndpointStatus"] == "InService"
    assert described["ProductionVariants"][0]["CurrentInstanceCount"] == 1


def test_openai_routes_name_the_endpoint(gateway: GatewayProcess) -> None:
    models = httpx.get(f"{gateway.url}/v1/models").json()
    assert "llama-tiny" in [m["id"] for m in models["data"]]
    reply = httpx.post(f"{gateway.url}/v1/chat/completions", timeout=60, json={
        "model": "llama-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] == 4


def test_sagemaker_sdk_predictor(gateway: GatewayProcess) -> None:
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")  # the seeds use SDK v2
    sagemaker_sdk = pytest.importorskip("sagemaker", reason="the sagemaker SDK is in the test extra")
    from sagemaker.deserializers import JSONDeserializer
    from sagemaker.predictor import Predictor
    from sagemaker.serializers import JSONSerializer

    sagemaker, runtime = clients(gateway.url)
    session = sagemaker_sdk.Session(
        boto_session=boto3.Session(region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"),
        sagemaker_client=sagemaker, sagemaker_runtime_client=runtime)
    predictor = Predictor("llama-tiny", sagemaker_session=session, serializer=JSONSerializer(),
                          deserializer=JSONDeserializer())
    assert predictor.predict(GENERATE)[0]["generated_text"]
    chat = predictor.predict({**MESSAGES, "top_p": 0.6, "temperature": 0.9, "stop": ["<|eot_id|>"]})
    assert chat["choices"][0]["message"]["content"] is not None


def test_inference_component_with_two_copies_both_serving(gateway: GatewayProcess) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_endpoint_config(EndpointConfigName="multi-config", ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="multi", EndpointConfigName="multi-config")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="multi", WaiterConfig=WAIT)
    # What the SDK's ResourceRequirements(requests={"copies": 2, "num_cpus": 1, "memory": 256}) sends.
    sagemaker.create_inference_component(
        InferenceComponentName="multi-tiny", EndpointName="multi", VariantName="AllTraffic",
        Specification={"ModelName": "llama-tiny", "ComputeResourceRequirements": {
            "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 2})
    until(lambda: component(sagemaker, "multi-tiny")["InferenceComponentStatus"] == "InService", what="InService")
    assert component(sagemaker, "multi-tiny")["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}

    running = copies(gateway.url, "multi-tiny")
    assert len({c["pid"] for c in running}) == 2 and all(c["state"] == "Ready" for c in running)
    for _ in range(6):
        assert invoke(runtime, "multi", GENERATE, InferenceComponentName="multi-tiny")[0]["generated_text"]
    served = [copy_metric(gateway.url, c, "pier_http_requests_total", route="/invocations", status="200")
              for c in running]
    assert all(n >= 1 for n in served), served  # both copies answered


def component(sagemaker: Any, name: str) -> dict[str, Any]:
    return sagemaker.describe_inference_component(InferenceComponentName=name)


def test_a_killed_copy_is_replaced_while_the_other_serves(gateway: GatewayProcess) -> None:
    sagemaker, runtime = clients(gateway.url)
    victim, survivor = sorted(copies(gateway.url, "multi-tiny"), key=lambda c: c["copy_id"])
    os.kill(victim["pid"], signal.SIGKILL)
    # The backend notices within its poll interval (0.2 s); a request sent in that window to the dead copy's
    # pooled connection can fail (the data plane does not resend a request that may have reached a copy).
    until(lambda: {c["copy_id"]: c["state"] for c in copies(gateway.url, "multi-tiny")}[victim["copy_id"]] != "Ready",
          timeout=5, what="the death noticed")
    for _ in range(4):  # the survivor answers while the victim is down
        assert invoke(runtime, "multi", GENERATE, InferenceComponentName="multi-tiny")[0]["generated_text"]
        assert sagemaker.describe_endpoint(EndpointName="multi")["EndpointStatus"] == "InService"
        assert component(sagemaker, "multi-tiny")["InferenceComponentStatus"] == "InService"

    def replaced() -> bool:
        now = {c["copy_id"]: c for c in copies(gateway.url, "multi-tiny")}
        again = now.get(victim["copy_id"])
        return bool(again and again["state"] == "Ready" and again["pid"] != victim["pid"] and again["restarts"] >= 1)

    until(replaced, what="the killed copy back")
    assert {c["pid"] for c in copies(gateway.url, "multi-tiny")} >= {survivor["pid"]}
    assert component(sagemaker, "multi-tiny")["RuntimeConfig"]["CurrentCopyCount"] == 2


def test_copy_count_two_to_one(gateway: GatewayProcess) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.update_inference_component_runtime_config(InferenceComponentName="multi-tiny",
                                                        DesiredRuntimeConfig={"CopyCount": 1})
    until(lambda: len(copies(gateway.url, "multi-tiny")) == 1, what="one copy left")
    until(lambda: component(sagemaker, "multi-tiny")["InferenceComponentStatus"] == "InService", what="InService")
    assert component(sagemaker, "multi-tiny")["RuntimeConfig"] == {"DesiredCopyCount": 1, "CurrentCopyCount": 1}
    assert invoke(runtime, "multi", GENERATE, InferenceComponentName="multi-tiny")[0]["generated_text"]


def test_model_data_from_s3_uncompressed_prefix(gateway: GatewayProcess, s3_url: str, tiny_gguf: Path) -> None:
    s3 = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1", aws_access_key_id="x",
                      aws_secret_access_key="x")
    s3.create_bucket(Bucket="models")
    s3.upload_file(str(tiny_gguf), "models", "tiny/model.gguf")
    sagemaker, runtime = clients(gateway.url)
    sagemaker.create_model(ModelName="from-s3", PrimaryContainer={"Image": TGI_IMAGE, "ModelDataSource": {
        "S3DataSource": {"S3Uri": "s3://models/tiny/", "S3DataType": "S3Prefix", "CompressionType": "None"}}})
    sagemaker.create_endpoint_config(EndpointConfigName="from-s3", ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": "from-s3", "InstanceType": "ml.c7g.large",
        "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="from-s3", EndpointConfigName="from-s3")
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="from-s3", WaiterConfig=WAIT)
    assert invoke(runtime, "from-s3", GENERATE)[0]["generated_text"]
    sagemaker.delete_endpoint(EndpointName="from-s3")
    sagemaker.get_waiter("endpoint_deleted").wait(EndpointName="from-s3", WaiterConfig=WAIT)


def test_a_restarted_gateway_brings_the_endpoints_back(gateway: GatewayProcess) -> None:
    before = {c["copy_id"] for c in httpx.get(f"{gateway.url}/pier/copies").json()["copies"]}
    assert gateway.stop() in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM once it has shut down
    assert "Application shutdown complete" in gateway.output()  # every copy was stopped on the way out
    again = GatewayProcess(gateway.state_dir, gateway.port, gateway.log, gateway.env)
    gateway.process = again.process  # the module's fixture stops whichever runs last
    again.wait_ready()
    sagemaker, runtime = clients(gateway.url)
    assert {e["EndpointName"]: e["EndpointStatus"] for e in sagemaker.list_endpoints()["Endpoints"]} == {
        "llama-tiny": "InService", "multi": "InService"}
    until(lambda: {c["copy_id"] for c in httpx.get(f"{gateway.url}/pier/copies").json()["copies"]
                   if c["state"] == "Ready"} == before, what="the same copies ready again")
    assert invoke(runtime, "llama-tiny", GENERATE)[0]["generated_text"]
    assert invoke(runtime, "multi", MESSAGES, InferenceComponentName="multi-tiny")["choices"]


def test_delete_everything(gateway: GatewayProcess) -> None:
    sagemaker, runtime = clients(gateway.url)
    sagemaker.delete_inference_component(InferenceComponentName="multi-tiny")
    until(lambda: not sagemaker.list_inference_components(EndpointNameEquals="multi")["InferenceComponents"],
          what="component gone")
    for name in ("multi", "llama-tiny"):
        sagemaker.delete_endpoint(EndpointName=name)
        sagemaker.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig=WAIT)
    sagemaker.delete_endpoint_config(EndpointConfigName="multi-config")
    sagemaker.delete_endpoint_config(EndpointConfigName="llama-tiny-config")
    sagemaker.delete_model(ModelName="llama-tiny")
    assert httpx.get(f"{gateway.url}/pier/copies").json()["copies"] == []
    with pytest.raises(runtime.exceptions.ValidationError, match="Endpoint llama-tiny of account"):
        invoke(runtime, "llama-tiny", GENERATE)


def test_the_cli_client_deploys_chats_and_deletes(gateway: GatewayProcess, tiny_gguf: Path, tmp_path: Path) -> None:
    from pier.client.deploy_file import load
    from pier.client.pier_client import PierClient

    path = tmp_path / "pier.yaml"
    path.write_text(f"endpoint: cli\ncomponents:\n  - {{name: cli-tiny, model: {{data: {tiny_gguf}}}, copies: 1, "
                    "cpus: 1, memory_mb: 256}\n")
    client = PierClient(gateway.url)
    client.deploy(load(path), path.parent, timeout_s=120)
    assert [(r.name, r.status, r.copies_ready) for r in client.endpoints()] == [("cli", "InService", 1)]
    reply = "".join(client.chat("cli-tiny", [{"role": "user", "content": "hi"}], max_tokens=5))
    assert reply
    parts = b"".join(client.invoke_stream("cli", json.dumps({**GENERATE, "stream": True}), component="cli-tiny"))
    assert parts.count(b"data:") == 8
    [log] = client.logs("cli").values()
    assert "ready in" in log  # the copy's own log, through the gateway
    client.delete("cli")
    assert client.endpoints() == []
