"""Calls that fail on SageMaker fail on pier, with SageMaker's words: boto3's runtime and the openai client against
a whole gateway (fake backend), whose endpoints are made with boto3's control-plane calls."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from pier.gateway.app import create_gateway
from pier.gateway.targets import COMPONENT_NOT_ALLOWED, COMPONENT_REQUIRED, NO_CAPACITY
from tests.control.fakes import FakeBackend
from tests.gateway.served import Served, sagemaker_client, wait_for
from tests.sockets import serving

FAST = {"Delay": 0.05, "MaxAttempts": 200}
BODY = b'{"inputs": "hi"}'


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A gateway over a fake backend where `classic` serves a model on two variants, and `hosting` hosts the
    component `chat` (one copy) and `idle` (scaled to zero copies)."""
    folder = tmp_path_factory.mktemp("gateway")
    backend = FakeBackend()
    with serving(create_gateway(folder / "state", backend=backend, tick_s=0.05), lifespan="on") as url:
        _deploy(sagemaker_client(url), folder)
        yield Served(url, backend, folder / "state")


def _deploy(sagemaker: Any, folder: Path) -> None:
    model = folder / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF" + bytes(1024))
    sagemaker.create_model(ModelName="m", PrimaryContainer={"Image": "pier", "ModelDataUrl": str(model)})
    sagemaker.create_endpoint_config(EndpointConfigName="classic", ProductionVariants=[
        {"VariantName": name, "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}
        for name in ("blue", "green")])
    sagemaker.create_endpoint(EndpointName="classic", EndpointConfigName="classic")
    sagemaker.create_endpoint_config(EndpointConfigName="hosting", ProductionVariants=[
        {"VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1}])
    sagemaker.create_endpoint(EndpointName="hosting", EndpointConfigName="hosting")
    for name in ("classic", "hosting"):
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=FAST)
    for name, copies in (("chat", 1), ("idle", 0)):
        sagemaker.create_inference_component(
            InferenceComponentName=name, EndpointName="hosting", VariantName="AllTraffic",
            Specification={"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}},
            RuntimeConfig={"CopyCount": copies})
    wait_for(lambda: all(sagemaker.describe_inference_component(InferenceComponentName=n)[
        "InferenceComponentStatus"] == "InService" for n in ("chat", "idle")))


def runtime(url: str) -> Any:
    return boto3.client("sagemaker-runtime", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"total_max_attempts": 1}))


def refused(url: str, *, stream: bool = False, **parameters: Any) -> tuple[int, str, str]:
    call = runtime(url).invoke_endpoint_with_response_stream if stream else runtime(url).invoke_endpoint
    with pytest.raises(ClientError) as raised:
        call(Body=BODY, **parameters)
    error = raised.value.response
    return error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Code"], error["Error"]["Message"]


ROUTING_ERRORS = [
    # SageMaker's own words.
    ({"EndpointName": "hosting"}, COMPONENT_REQUIRED),
    ({"EndpointName": "classic", "InferenceComponentName": "chat"}, COMPONENT_NOT_ALLOWED),
    ({"EndpointName": "hosting", "InferenceComponentName": "idle"}, NO_CAPACITY),
    ({"EndpointName": "nope"}, "Endpoint nope of account 000000000000 not found."),
    # pier's words, where SageMaker's are not known.
    ({"EndpointName": "classic", "TargetVariant": "red"},
     "Endpoint classic has no variant red; its variants: blue, green. Check TargetVariant."),
    ({"EndpointName": "hosting", "InferenceComponentName": "other"},
     "Inference component other is not on endpoint hosting: check InferenceComponentName "
     "(ListInferenceComponents shows what each endpoint hosts)."),
]
# Parameters of InvokeEndpoint only.
INVOKE_ONLY_ERRORS = [
    ({"EndpointName": "classic", "TargetModel": "model-a.tar.gz"},  # SageMaker's words
     "Endpoint classic is not a multi-model endpoint and does not support target model header."),
    ({"EndpointName": "classic", "TargetContainerHostname": "second"},  # pier's
     "Endpoint classic is not a multi-container endpoint configured for direct invocation: drop "
     "TargetContainerHostname (second)."),
]


@pytest.mark.parametrize(("parameters", "message", "stream"),
                         [(*case, stream) for case in ROUTING_ERRORS for stream in (False, True)]
                         + [(*case, False) for case in INVOKE_ONLY_ERRORS])
def test_component_and_variant_errors_through_boto3(deployed: Served, parameters: dict[str, Any], message: str,
                                                    stream: bool) -> None:
    assert refused(deployed.url, stream=stream, **parameters) == (400, "ValidationError", message)


def test_the_right_names_reach_the_copies(deployed: Served) -> None:
    # The fake backend's copies listen nowhere: getting as far as trying them is the proof.
    for parameters in ({"EndpointName": "hosting", "InferenceComponentName": "chat"},
                       {"EndpointName": "hosting", "InferenceComponentName": "CHAT", "TargetVariant": "AllTraffic"},
                       {"EndpointName": "classic", "TargetVariant": "green"}):
        status, code, message = refused(deployed.url, **parameters)
        assert (status, code) == (503, "ServiceUnavailable") and "tried" in message, parameters


@pytest.mark.parametrize(("parameters", "message"), [
    ({"TargetVariant": "blue_1"}, "1 validation error detected: Value 'blue_1' at 'targetVariant' failed to satisfy "
                                  "constraint: Member must satisfy regular expression pattern: "
                                  "^[a-zA-Z0-9](-*[a-zA-Z0-9])*"),
    ({"InferenceComponentName": "c" * 64}, f"1 validation error detected: Value '{'c' * 64}' at "
                                           "'inferenceComponentName' failed to satisfy constraint: Member must have "
                                           "length less than or equal to 63"),
    ({"InferenceId": "i" * 65}, f"1 validation error detected: Value '{'i' * 65}' at 'inferenceId' failed to "
                                "satisfy constraint: Member must have length less than or equal to 64"),
    ({"InferenceId": "a\tb"}, "1 validation error detected: Value 'a\tb' at 'inferenceId' failed to satisfy "
                               "constraint: Member must satisfy regular expression pattern: \\A\\S[\\p{Print}]*\\z"),
    ({"CustomAttributes": "a" * 1025}, "1 validation error detected: Value at 'customAttributes' failed to satisfy "
                                       "constraint: Member must have length less than or equal to 1024"),
    ({"SessionId": "my_session"}, "1 validation error detected: Value 'my_session' at 'sessionId' failed to satisfy "
                                  "constraint: Member must satisfy regular expression pattern: "
                                  "^(NEW_SESSION)$|^[a-zA-Z0-9](-*[a-zA-Z0-9])*$"),
    ({"TargetModel": "m" * 1025}, f"1 validation error detected: Value '{'m' * 80}' at 'targetModel' failed to "
                                  "satisfy constraint: Member must have length less than or equal to 1024"),
    ({"TargetContainerHostname": "a.b"}, "1 validation error detected: Value 'a.b' at 'targetContainerHostname' "
                                         "failed to satisfy constraint: Member must satisfy regular expression "
                                         "pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*"),
    ({"EnableExplanations": "x" * 65}, f"1 validation error detected: Value '{'x' * 65}' at 'enableExplanations' "
                                       "failed to satisfy constraint: Member must have length less than or equal "
                                       "to 64"),
    ({"TargetVariant": "a_b", "InferenceId": "i" * 65},
     "2 validation errors detected: Value 'a_b' at 'targetVariant' failed to satisfy constraint: Member must satisfy "
     "regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*; Value "
     f"'{'i' * 65}' at 'inferenceId' failed to satisfy constraint: Member must have length less than or equal to 64"),
])
def test_parameters_botocore_sends_unchecked_are_refused_as_sagemaker_words_it(
        deployed: Served, parameters: dict[str, Any], message: str) -> None:
    assert refused(deployed.url, EndpointName="classic", **parameters) == (400, "ValidationError", message)


def test_a_session_cannot_be_opened_on_the_streaming_route(deployed: Served) -> None:
    status, code, message = refused(deployed.url, stream=True, EndpointName="classic", SessionId="NEW_SESSION")
    assert (status, code) == (400, "ValidationError")
    assert message.endswith("Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")


@pytest.mark.parametrize(("header", "value", "message"), [
    ("X-Amzn-SageMaker-Inference-Id", "", "Value '' at 'inferenceId' failed to satisfy constraint: Member must have "
                                          "length greater than or equal to 1"),
    ("X-Amzn-SageMaker-Target-Model", "", "at 'targetModel' failed to satisfy constraint: Member must have length "
                                          "greater than or equal to 1"),
    ("Accept", "x" * 1025, "at 'accept' failed to satisfy constraint: Member must have length less than or equal to "
                           "1024"),
])
def test_what_botocore_itself_would_refuse_is_refused_on_the_wire_too(deployed: Served, header: str, value: str,
                                                                      message: str) -> None:
    answer = httpx.post(f"{deployed.url}/endpoints/classic/invocations", content=BODY, headers={header: value})
    assert (answer.status_code, answer.headers["x-amzn-ErrorType"]) == (400, "ValidationError")
    assert message in answer.json()["message"]


def openai_client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=10)


MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("base", "model", "message"), [
    # pier's /v1: `model` names the endpoint, under InvokeEndpoint's rules.
    ("/v1", "hosting", COMPONENT_REQUIRED),
    ("/v1", "classic/chat", COMPONENT_NOT_ALLOWED),
    ("/v1", "hosting/idle", NO_CAPACITY),
    ("/v1", "idle", NO_CAPACITY),
    # SageMaker's OpenAI-compatible paths: the component is named in the path.
    ("/endpoints/hosting/openai/v1", "anything", COMPONENT_REQUIRED),
    ("/endpoints/classic/inference-components/chat/openai/v1", "anything", COMPONENT_NOT_ALLOWED),
    ("/endpoints/hosting/inference-components/idle/openai/v1", "anything", NO_CAPACITY),
    # pier's /endpoints/E/v1: the component by header only.
    ("/endpoints/hosting/v1", "chat", COMPONENT_REQUIRED),
])
def test_component_errors_through_the_openai_client(deployed: Served, base: str, model: str, message: str) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        openai_client(deployed.url + base).chat.completions.create(model=model, messages=MESSAGES)  # type: ignore[arg-type]
    assert raised.value.status_code == 400
    said = raised.value.body["message"]  # type: ignore[index]
    if base == "/v1" and message == COMPONENT_REQUIRED:  # pier's own route adds how to name it there
        assert said == (f"{message} On this route, name it in `model`: {model}/INFERENCE_COMPONENT "
                        "(ListInferenceComponents shows what the endpoint hosts).")
    elif base.endswith("/openai/v1") and message == COMPONENT_REQUIRED:  # the header it asks for is refused there
        assert said == (f"{message} On this path, name it in the path: /endpoints/hosting/inference-components/"
                        "INFERENCE_COMPONENT/openai/v1/... (ListInferenceComponents shows what the endpoint hosts).")
    else:
        assert said == message


@pytest.mark.parametrize("base", ["/v1", "/endpoints/hosting/inference-components/chat/openai/v1"])
def test_the_right_names_reach_the_copies_through_openai(deployed: Served, base: str) -> None:
    with pytest.raises(openai.InternalServerError, match="tried"):  # 503: the fake copies listen nowhere
        openai_client(deployed.url + base).chat.completions.create(model="hosting/chat", messages=MESSAGES)  # type: ignore[arg-type]


def test_the_component_header_is_refused_on_sagemakers_openai_path(deployed: Served) -> None:
    answer = httpx.post(f"{deployed.url}/endpoints/hosting/openai/v1/chat/completions",
                        json={"messages": MESSAGES}, headers={"X-Amzn-SageMaker-Inference-Component": "chat"})
    assert answer.status_code == 400
    assert "name the inference component in the path" in answer.json()["error"]["message"]
