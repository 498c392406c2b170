"""An embedding model deployed as an endpoint and called through the gateway: boto3's InvokeEndpoint with TEI's
shape, and the openai client's embeddings.create on /v1 (`model` names the endpoint) and on SageMaker's
OpenAI-compatible path, all giving llama-cpp-python's own vectors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import openai
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.sockets import free_port

pytestmark = pytest.mark.e2e

TEXTS = ["the cat sat on the mat", "a dog"]


@pytest.fixture(scope="module")
def gateway(embedding_ggufs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "model").mkdir()
    (folder / "model" / "model.gguf").symlink_to(embedding_ggufs["cls"])
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log") as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        sagemaker.create_model(ModelName="embedder", PrimaryContainer={
            "ModelDataUrl": f"file://{folder / 'model'}", "Environment": {
            "MAX_BATCH_TOTAL_TOKENS": "512", "PIER_FLASH_ATTENTION": "false"}})  # llama-cpp-python's numbers
        sagemaker.create_endpoint_config(EndpointConfigName="embedder", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "embedder", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="embedder", EndpointConfigName="embedder")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName="embedder", WaiterConfig=WAIT)
        yield process


@pytest.fixture(scope="module")
def expected(embedding_ggufs: dict[str, Path]) -> list[np.ndarray]:
    import llama_cpp

    reference = llama_cpp.Llama(str(embedding_ggufs["cls"]), embedding=True, n_ctx=512, verbose=False,
                                flash_attn=False)
    return [np.array(v, np.float32) for v in reference.embed(TEXTS, normalize=True)]


def test_invoke_endpoint_with_teis_shape(gateway: GatewayProcess, expected: list[np.ndarray]) -> None:
    _, runtime = clients(gateway.url)
    answer = runtime.invoke_endpoint(EndpointName="embedder", ContentType="application/json",
                                     Body=json.dumps({"inputs": TEXTS}))
    vectors = json.loads(answer["Body"].read())
    assert all(np.allclose(got, want, atol=1e-6) for got, want in zip(vectors, expected, strict=True))


@pytest.mark.parametrize("base", ["/v1", "/endpoints/embedder/openai/v1"])
def test_openai_embeddings_through_the_gateway(gateway: GatewayProcess, expected: list[np.ndarray],
                                               base: str) -> None:
    client = openai.OpenAI(base_url=gateway.url + base, api_key="unused", max_retries=0)
    answer = client.embeddings.create(model="embedder", input=TEXTS)
    assert all(np.allclose(got.embedding, want, atol=1e-6) for got, want in zip(answer.data, expected, strict=True))
    with pytest.raises(openai.BadRequestError, match="is an embedding model"):
        client.chat.completions.create(model="embedder", messages=[{"role": "user", "content": "hi"}])
