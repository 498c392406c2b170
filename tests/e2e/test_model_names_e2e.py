"""A model deployed as endpoint `gen` behind a real gateway process: OpenAI answers name `gen` (what the client
asked for), not the GGUF's own name, whole and streamed, by every OpenAI route; /v1/models lists what may be
called; llama-server's /tokenize and /detokenize answer under the endpoint's paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(tiny_gguf)
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log") as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        sagemaker.create_model(ModelName="gen", PrimaryContainer={"ModelDataUrl": f"file://{folder / 'model'}"})
        sagemaker.create_endpoint_config(EndpointConfigName="gen", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "gen", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="gen", EndpointConfigName="gen")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="gen", WaiterConfig=WAIT)
        yield process


@pytest.mark.parametrize("base", ["/v1", "/endpoints/gen/v1", "/endpoints/gen/openai/v1"])
def test_answers_name_the_endpoint(gateway: GatewayProcess, base: str) -> None:
    client = openai.OpenAI(base_url=gateway.url + base, api_key="unused", max_retries=0)
    whole = client.chat.completions.create(model="gen", messages=MESSAGES, max_tokens=3)  # type: ignore[arg-type]
    assert whole.model == "gen"
    chunks = list(client.chat.completions.create(model="gen", messages=MESSAGES, max_tokens=3,  # type: ignore[arg-type]
                                                 stream=True, stream_options={"include_usage": True}))
    assert len(chunks) > 2 and {c.model for c in chunks} == {"gen"}
    assert client.completions.create(model="gen", prompt="hello", max_tokens=3).model == "gen"
    streamed = list(client.completions.create(model="gen", prompt="hello", max_tokens=3, stream=True))
    assert streamed and {c.model for c in streamed} == {"gen"}
    assert [m.id for m in client.models.list().data] == ["gen"]


def test_a_body_without_model_is_named_by_the_gateway(gateway: GatewayProcess) -> None:
    """Under an endpoint's path the body's `model` is free; left out, the answer names the endpoint."""
    answer = httpx.post(gateway.url + "/endpoints/gen/v1/completions", json={"prompt": "hello", "max_tokens": 1})
    assert answer.status_code == 200 and answer.json()["model"] == "gen"


@pytest.mark.parametrize("base", ["/endpoints/gen", "/endpoints/gen/openai"])
def test_tokenize_round_trips_through_the_gateway(gateway: GatewayProcess, base: str) -> None:
    text = "the cat sat on the mat"
    tokens = httpx.post(gateway.url + base + "/tokenize", json={"content": text}).json()["tokens"]
    assert tokens and all(isinstance(t, int) for t in tokens)
    back = httpx.post(gateway.url + base + "/detokenize", json={"tokens": tokens}).json()["content"]
    assert back.strip() == text
    bad = httpx.post(gateway.url + base + "/detokenize", json={"tokens": [-5]})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    missing = httpx.post(gateway.url + "/endpoints/nope/tokenize", json={"content": text})
    assert missing.status_code in (400, 404) and "nope" in missing.json()["error"]["message"]
