"""Routing strategies and stateful sessions as a user meets them: a gateway process, an inference component of
two real copies (TINY GGUF), boto3 for the control plane and the runtime, the openai client on SageMaker's
OpenAI-compatible path. The endpoint's RoutingConfig changes with UpdateEndpoint; the copies stay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from botocore.exceptions import ClientError

from pier.runtime.routing_strategy import prefix_key, rendezvous_order
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients, copies
from tests.server.processes import copy_metric
from tests.sockets import free_port
from tests.waiting import until

pytestmark = pytest.mark.e2e

ENDPOINT, COMPONENT = "routed", "routed-tiny"
PREFIX_AWARE = {"RoutingStrategy": "PREFIX_AWARE",
                "PrefixAwareRoutingConfig": {"PrefixLength": 1024, "ConcurrencyThreshold": 1}}


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log") as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        sagemaker.create_model(ModelName="tiny", PrimaryContainer={
            "ModelDataUrl": f"file://{folder / 'model'}", "Environment": {"MAX_TOTAL_TOKENS": "1024"}})
        configure(sagemaker, "prefix", PREFIX_AWARE, create=True)
        sagemaker.create_inference_component(
            InferenceComponentName=COMPONENT, EndpointName=ENDPOINT, VariantName="AllTraffic",
            Specification={"ModelName": "tiny", "ComputeResourceRequirements": {
                "NumberOfCpuCoresRequired": 1, "MinMemoryRequiredInMb": 256}}, RuntimeConfig={"CopyCount": 2})
        until(lambda: sagemaker.describe_inference_component(InferenceComponentName=COMPONENT)[
            "InferenceComponentStatus"] == "InService", timeout=120, what="the component InService")
        yield process


def configure(sagemaker: Any, name: str, routing: dict[str, Any], *, create: bool = False) -> None:
    sagemaker.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "InstanceType": "local", "InitialInstanceCount": 1, "RoutingConfig": routing}])
    if create:
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=name)
    else:
        sagemaker.update_endpoint(EndpointName=ENDPOINT, EndpointConfigName=name)
    sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)


def served(gateway: GatewayProcess) -> dict[str, float]:
    return {c["copy_id"]: copy_metric(gateway.url, c, "pier_http_requests_total", route="/invocations", status="200")
            for c in copies(gateway.url, COMPONENT)}


def since(gateway: GatewayProcess, before: dict[str, float]) -> dict[str, int]:
    return {copy_id: int(count - before[copy_id]) for copy_id, count in served(gateway).items()}


def body(prompt: str, tokens: int = 2) -> bytes:
    return json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": tokens}}).encode()


def invoke(gateway: GatewayProcess, payload: bytes, **extra: Any) -> dict[str, Any]:
    _, runtime = clients(gateway.url)
    answer: dict[str, Any] = runtime.invoke_endpoint(EndpointName=ENDPOINT, InferenceComponentName=COMPONENT,
                                                     ContentType="application/json", Body=payload, **extra)
    answer["Body"].read()
    return answer


def test_prefix_aware_sends_each_prefix_to_its_copy_until_its_threshold(gateway: GatewayProcess) -> None:
    ids = sorted(c["copy_id"] for c in copies(gateway.url, COMPONENT))
    described = clients(gateway.url)[0].describe_endpoint_config(EndpointConfigName="prefix")
    assert described["ProductionVariants"][0]["RoutingConfig"] == PREFIX_AWARE
    expected = dict.fromkeys(ids, 0)
    before = served(gateway)
    for topic in ("the cat", "a dog", "one bird"):
        payloads = [body(f"{topic} " * 300 + f"question {n}") for n in range(3)]  # the first 1,024 bytes agree
        expected[rendezvous_order(prefix_key(payloads[0][:1024]), ids)[0]] += 3
        for payload in payloads:
            invoke(gateway, payload)
    assert since(gateway, before) == expected  # every prefix on its own copy, as the hashed order says

    before = served(gateway)
    same = body("the cat " * 300, tokens=48)
    with ThreadPoolExecutor(6) as pool:  # at once: past one in flight, the prefix overflows to the other copy
        list(pool.map(lambda _: invoke(gateway, same), range(6)))
    assert all(count >= 1 for count in since(gateway, before).values())


def test_least_outstanding_requests_and_random(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    configure(sagemaker, "least", {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"})
    before = served(gateway)
    for _ in range(6):
        invoke(gateway, body("the cat " * 300))
    assert sorted(since(gateway, before).values()) == [3, 3]  # one at a time: they take turns

    configure(sagemaker, "random", {"RoutingStrategy": "RANDOM"})
    before = served(gateway)
    for _ in range(20):
        invoke(gateway, body("the cat " * 300))
    counts = sorted(since(gateway, before).values())
    assert counts[0] >= 1 and sum(counts) == 20


def test_a_session_stays_on_its_copy_until_closed(gateway: GatewayProcess) -> None:
    sagemaker, _ = clients(gateway.url)
    configure(sagemaker, "least-again", {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"})
    before = served(gateway)
    opened = invoke(gateway, body("turn one"), SessionId="NEW_SESSION")
    session_id, _, expires = opened["NewSessionId"].partition("; Expires=")
    assert len(session_id) == 32 and expires.endswith("Z")
    for turn in range(5):
        invoke(gateway, body(f"turn one and turn {turn}"), SessionId=session_id)
    assert sorted(since(gateway, before).values()) == [0, 6]  # least outstanding alone would alternate
    assert invoke(gateway, b'{"requestType": "CLOSE"}', SessionId=session_id)["ClosedSessionId"] == session_id
    with pytest.raises(ClientError, match="is not open on endpoint"):
        invoke(gateway, body("after"), SessionId=session_id)


def test_openai_client_on_the_components_openai_path(gateway: GatewayProcess) -> None:
    client = openai.OpenAI(base_url=f"{gateway.url}/endpoints/{ENDPOINT}/inference-components/{COMPONENT}/openai/v1",
                           api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == [COMPONENT]  # what this path calls
    answer = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "the cat"}],
                                            max_tokens=3)
    assert answer.choices[0].message.role == "assistant" and answer.model == "any"  # the name asked for
    with pytest.raises(openai.BadRequestError, match="inference-components"):
        openai.OpenAI(base_url=f"{gateway.url}/endpoints/{ENDPOINT}/openai/v1", api_key="unused",
                      max_retries=0).models.list()
