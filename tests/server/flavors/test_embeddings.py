"""Embeddings from a model server on a real embedding GGUF: OpenAI's /v1/embeddings through the openai client,
TEI's shape on /invocations and /embed, compared with llama-cpp-python's own vectors; and the clear 400s when
an embedding model is asked to generate or a generation model for embeddings."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from pier.server.container import build_app
from pier.server.model_location import ModelLocation
from pier.server.settings import ServerSettings
from tests.sockets import serving
from tests.waiting import until

TEXTS = ["the cat sat on the mat", "a dog", "hello world and more words here"]


def started(gguf: Path) -> Iterator[str]:
    settings = ServerSettings.from_env({}, max_batch_total_tokens=256, threads=1, flash_attention=False)
    with serving(build_app(settings, ModelLocation(gguf.parent, gguf)), lifespan="on") as url:
        until(lambda: httpx.get(url + "/ping").status_code == 200, timeout=60, what="the model to load")
        yield url


@pytest.fixture(scope="module")
def embedding_server(embedding_ggufs: dict[str, Path]) -> Iterator[str]:
    yield from started(embedding_ggufs["mean"])


@pytest.fixture(scope="module")
def generation_server(tiny_gguf: Path) -> Iterator[str]:
    yield from started(tiny_gguf)


@pytest.fixture(scope="module")
def expected(embedding_ggufs: dict[str, Path]) -> list[np.ndarray]:
    import llama_cpp

    reference = llama_cpp.Llama(str(embedding_ggufs["mean"]), embedding=True, n_ctx=256, verbose=False,
                                flash_attn=False)
    return [np.array(v, np.float32) for v in reference.embed(TEXTS, normalize=True)]


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def test_openai_client_gets_llama_cpps_vectors(embedding_server: str, expected: list[np.ndarray]) -> None:
    answer = client(embedding_server).embeddings.create(model="any", input=TEXTS)  # base64 on the wire
    assert [d.index for d in answer.data] == [0, 1, 2] and answer.model == "any"  # the name asked for
    for got, want in zip(answer.data, expected, strict=True):
        assert np.allclose(got.embedding, want, atol=1e-6)
    assert answer.usage.prompt_tokens == answer.usage.total_tokens > len(TEXTS)


def test_nulls_are_the_defaults(embedding_server: str, expected: list[np.ndarray]) -> None:
    """As OpenAI reads them: `"encoding_format": null` is float, `"dimensions": null` the model's own."""
    body = httpx.post(embedding_server + "/v1/embeddings", json={
        "input": TEXTS[1], "encoding_format": None, "dimensions": None, "user": None}).json()
    assert np.allclose(body["data"][0]["embedding"], expected[1], atol=1e-6)


@pytest.mark.parametrize("encoding", ["float", "base64"])
def test_raw_encodings_and_token_ids(embedding_server: str, expected: list[np.ndarray], encoding: str) -> None:
    tokens = httpx.post(embedding_server + "/v1/embeddings", json={"input": TEXTS[1]}).json()["usage"]["prompt_tokens"]
    body = httpx.post(embedding_server + "/v1/embeddings",
                      json={"input": TEXTS[1], "encoding_format": encoding}).json()
    vector = body["data"][0]["embedding"]
    if encoding == "base64":
        vector = np.frombuffer(base64.b64decode(vector), "<f4")
    assert np.allclose(vector, expected[1], atol=1e-6) and tokens == body["usage"]["prompt_tokens"]


def test_tei_shape_on_invocations_and_embed(embedding_server: str, expected: list[np.ndarray]) -> None:
    one = httpx.post(embedding_server + "/invocations", json={"inputs": TEXTS[0]}).json()
    many = httpx.post(embedding_server + "/embed", json={"inputs": TEXTS}).json()
    assert len(one) == 1 and np.allclose(one[0], expected[0], atol=1e-6)
    assert all(np.allclose(got, want, atol=1e-6) for got, want in zip(many, expected, strict=True))
    raw = httpx.post(embedding_server + "/embed", json={"inputs": TEXTS[0], "normalize": False}).json()[0]
    assert np.allclose(np.array(raw) / np.linalg.norm(raw), expected[0], atol=1e-6) and np.linalg.norm(raw) > 1.5


@pytest.mark.parametrize(("path", "body", "status", "message"), [
    ("/v1/embeddings", {"input": "x", "dimensions": 8}, 400, "cannot shorten them: leave out `dimensions`"),
    ("/v1/embeddings", {"input": []}, 400, "`input` is an empty list"),
    ("/v1/embeddings", {"input": [5, 10**6]}, 400, "outside the model's vocabulary"),
    ("/v1/embeddings", {"input": " ".join(["cat"] * 300)}, 400, "more than the 256 this model embeds at once"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, 400,
     "is an embedding model (mean pooling): it does not generate text"),
    ("/generate", {"inputs": "hi"}, 422, "is an embedding model"),
    ("/invocations", {"messages": [{"role": "user", "content": "hi"}]}, 422, "is an embedding model"),
])
def test_what_an_embedding_model_refuses(embedding_server: str, path: str, body: dict[str, object], status: int,
                                         message: str) -> None:
    answer = httpx.post(embedding_server + path, json=body)
    assert answer.status_code == status, answer.text
    assert message in answer.text


def test_a_generation_model_asked_for_embeddings(generation_server: str) -> None:
    with pytest.raises(openai.BadRequestError, match="is a generation model, not an embedding model"):
        client(generation_server).embeddings.create(model="any", input="hello")
    answer = httpx.post(generation_server + "/embed", json={"inputs": "hello"})
    assert answer.status_code == 422 and "not an embedding model" in answer.json()["error"]


def test_models_lists_the_embedding_model(embedding_server: str) -> None:
    assert [m.id for m in client(embedding_server).models.list()] == ["embed-mean"]


def test_info_and_health_read_as_teis(embedding_server: str) -> None:
    info = httpx.get(embedding_server + "/info").json()
    assert info["model_type"] == {"embedding": {"pooling": "mean"}} and info["max_input_length"] == 256
    assert httpx.get(embedding_server + "/health").status_code == 200
    assert "pier_http_requests_total" in httpx.get(embedding_server + "/metrics").text
