"""`pier bench ENDPOINT --gateway URL` against a `pier up` gateway with one copy on a TINY GGUF: SageMaker's
response stream (AWS event-stream frames) with each payload shape, the gateway's OpenAI routes, and an
endpoint that does not exist (errors by code, no crash)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from pier.bench import BenchOptions, BenchResult, run_bench
from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT = "bench-tiny"
INPUT_LEN = 12
OUTPUT_LEN = 4
IN_SERVICE = {"Delay": 1, "MaxAttempts": 120}
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("bench-gateway")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log", FAKE_AWS) as process:
        process.wait_ready()
        _deploy(process.url, folder / "model")
        yield process.url


def _deploy(url: str, model_dir: Path) -> None:
    sagemaker = boto3.client(
        "sagemaker", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    sagemaker.create_model(
        ModelName=ENDPOINT,
        ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
        PrimaryContainer={"Image": "pier", "ModelDataUrl": f"file://{model_dir}"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=ENDPOINT,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": ENDPOINT, "InstanceType": "local", "InitialInstanceCount": 1}
        ],
    )
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=ENDPOINT)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=IN_SERVICE)


def bench(target: str, **fields: object) -> BenchResult:
    return run_bench(
        BenchOptions(
            target=target,
            requests=3,
            input_len=INPUT_LEN,
            output_len=OUTPUT_LEN,  # type: ignore[arg-type]
            warmup=1,
            timeout_s=30,
            progress=False,
            **fields,
        )
    )


# openai-completions payloads take token ids, from the endpoint's /tokenize on the gateway: no BOS is added to them
@pytest.mark.parametrize(("payload", "overhead"), [("openai-chat", 18), ("openai-completions", 0), ("tgi", 1)])
def test_endpoint_response_stream(gateway: str, payload: str, overhead: int) -> None:
    result = bench(ENDPOINT, gateway=gateway, payload=payload)
    assert result.targets[0].url == f"{gateway}/endpoints/{ENDPOINT}/invocations-response-stream"
    (run,) = result.runs
    assert run.metrics.completed == 3, run.metrics.errors_by_code
    assert {(r.input_tokens, r.output_tokens) for r in run.records} == {(INPUT_LEN + overhead, OUTPUT_LEN)}
    # the endpoint's copy's engine steps, read through the gateway's /metrics: 3 requests one after another, each
    # with its other tokens in decode steps (+-1: a step is timed just after its tokens go out, so the last one
    # before either scrape may fall on the other side of it)
    assert run.engine is not None and abs(run.engine.step["decode"].steps - 3 * (OUTPUT_LEN - 1)) <= 1


@pytest.mark.parametrize("route", ["/v1/completions", f"/endpoints/{ENDPOINT}/v1/chat/completions"])
def test_gateway_openai_routes(gateway: str, route: str) -> None:
    (run,) = bench(gateway + route).runs
    assert run.metrics.completed == 3, run.metrics.errors_by_code


def test_a_missing_endpoint_is_counted_as_errors(gateway: str) -> None:
    (run,) = bench("no-such-endpoint", gateway=gateway).runs
    assert run.metrics.completed == 0
    (code,) = run.metrics.errors_by_code
    assert code.startswith("4"), run.records[0].error_message


def test_a_rate_schedule_on_a_gateway_plots_the_copies_over_time(gateway: str, tmp_path: Path) -> None:
    result = bench(f"{gateway}/endpoints/{ENDPOINT}/v1/chat/completions", rate_schedule=((4.0, 1.5), (0.0, 1.0)),
                   out=tmp_path)
    (run,) = result.runs
    assert run.level.mode == "schedule" and run.metrics.completed >= 1 and not run.metrics.errors_by_code
    assert run.copies and all(sample.ready == {f"{ENDPOINT}/AllTraffic": 1} for sample in run.copies)
    assert run.copies[-1].at_s >= 2.0  # watched for the whole schedule, the pause included
    assert (tmp_path / "schedule.png").read_bytes().startswith(b"\x89PNG")


def test_an_inference_component_through_invoke_endpoint(gateway: str, tiny_gguf: Path, tmp_path: Path) -> None:
    """The seed's way: InvokeEndpoint on an endpoint that hosts components, the component named by its header."""
    (tmp_path / "model.gguf").symlink_to(tiny_gguf)
    sagemaker = boto3.client(
        "sagemaker", endpoint_url=gateway, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    endpoint, component = "bench-hosting", "bench-component"
    sagemaker.create_model(ModelName=component, ExecutionRoleArn="arn:aws:iam::1:role/sagemaker",
                           PrimaryContainer={"Image": "pier", "ModelDataUrl": f"file://{tmp_path}"})
    sagemaker.create_endpoint_config(EndpointConfigName=endpoint, ProductionVariants=[
        {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName=endpoint, EndpointConfigName=endpoint)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=endpoint, WaiterConfig=IN_SERVICE)
    sagemaker.create_inference_component(
        InferenceComponentName=component, EndpointName=endpoint, VariantName="AllTraffic",
        Specification={"ModelName": component, "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 256}},
        RuntimeConfig={"CopyCount": 1})
    until(lambda: sagemaker.describe_inference_component(InferenceComponentName=component)[
        "InferenceComponentStatus"] == "InService", timeout=120, what="the component InService")
    route = f"{gateway}/endpoints/{endpoint}/invocations"
    (named,) = bench(route, inference_component=component, payload="tgi").runs
    assert named.metrics.completed == 3, named.metrics.errors_by_code
    (unnamed,) = bench(route, payload="tgi").runs  # SageMaker refuses it without the header, and so does pier
    assert set(unnamed.metrics.errors_by_code) == {"400"}, unnamed.records[0].error_message
