"""A copy as a real process on a real (synthetic) GGUF: llama-server's tokenizer routes, and OpenAI answers
that name the model the client asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from pier.channel.headers import MODEL_NAME_HEADER
from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e

TEXT = "The quick brown fox, naïve café — 42 €!"


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerProcess]:
    log = tmp_path_factory.mktemp("logs") / "server.log"
    with ContainerProcess(model_dir, log) as process:  # no HF_MODEL_ID: the GGUF's own name
        yield process.wait_ready()


def test_tokenize_detokenize_round_trip(server: ContainerProcess) -> None:
    tokens = httpx.post(server.url + "/tokenize", json={"content": TEXT}).json()["tokens"]
    assert tokens and all(isinstance(t, int) for t in tokens)
    with_bos = httpx.post(server.url + "/tokenize", json={"content": TEXT, "add_special": True}).json()["tokens"]
    assert with_bos[1:] == tokens and len(with_bos) == len(tokens) + 1
    text = httpx.post(server.url + "/detokenize", json={"tokens": tokens}).json()["content"]
    assert text.strip() == TEXT  # SentencePiece writes the space it prefixes
    pieces = httpx.post(server.url + "/tokenize", json={"content": TEXT, "with_pieces": True}).json()["tokens"]
    assert [p["id"] for p in pieces] == tokens
    raw = b"".join(p["piece"].encode() if isinstance(p["piece"], str) else bytes(p["piece"]) for p in pieces)
    assert raw.decode().strip() == TEXT


def test_apply_template_gives_the_prompt_chat_completions_counts(server: ContainerProcess) -> None:
    messages = [{"role": "user", "content": "hello there"}]
    prompt = httpx.post(server.url + "/apply-template", json={"messages": messages}).json()["prompt"]
    assert "hello there" in prompt
    # the synthetic model's template writes its BOS itself, so no special tokens are added (as chat does)
    counted = httpx.post(server.url + "/tokenize", json={"content": prompt}).json()["tokens"]
    chat = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0).chat.completions.create(
        model="gen", messages=messages, max_tokens=1)  # type: ignore[arg-type]
    assert chat.usage is not None and chat.usage.prompt_tokens == len(counted)


@pytest.mark.parametrize(("path", "body"), [
    ("/tokenize", {"text": "no content field"}), ("/detokenize", {"tokens": [10**9]}),
    ("/apply-template", {"messages": "hi"}),
])
def test_bad_input_is_a_400_in_llama_servers_shape(server: ContainerProcess, path: str, body: object) -> None:
    response = httpx.post(server.url + path, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_answers_name_the_model_asked_for(server: ContainerProcess) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    assert client.chat.completions.create(model="gen", messages=messages, max_tokens=2).model == "gen"  # type: ignore[arg-type]
    chunks = list(client.chat.completions.create(model="gen", messages=messages, max_tokens=2,  # type: ignore[arg-type]
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks and {c.model for c in chunks} == {"gen"}
    assert client.completions.create(model="gen", prompt="hi", max_tokens=2).model == "gen"
    own = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1}).json()["model"]
    assert own == client.models.list().data[0].id != "gen"  # no name asked for: the copy's own, which it lists
    told = httpx.post(server.url + "/v1/completions", json={"prompt": "hi", "max_tokens": 1},
                      headers={MODEL_NAME_HEADER: "gen"}).json()["model"]
    assert told == "gen"
    listed = httpx.get(server.url + "/v1/models", headers={MODEL_NAME_HEADER: "gen"}).json()["data"]
    assert [m["id"] for m in listed] == ["gen"]
