"""A copy on a GPU, end to end: a real GGUF in a real model-server process with a GPU build of llama.cpp (CUDA,
Vulkan, Metal, ROCm). Skipped where llama.cpp has no GPU to offload to (CI has none): run on a GPU host with
LLAMA_CPP_LIB_PATH pointing at a GPU build, as benchmarks/gpu_device.sh does."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pier.engine.devices import gpu_offload_supported, gpus
from tests.server.processes import ContainerProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not (gpu_offload_supported() and gpus()), reason="no GPU that llama.cpp can offload to"),
]


def _folder(gguf: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / gguf.name).symlink_to(gguf)
    return folder


def _complete(url: str, **body: object) -> dict:
    response = httpx.post(url + "/v1/completions", json={"prompt": "the quick brown fox", "max_tokens": 16,
                                                         "temperature": 0, **body}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_copy_holding_a_gpu_runs_everything_on_it(small_gguf: Path, tmp_path: Path) -> None:
    with ContainerProcess(_folder(small_gguf, tmp_path), tmp_path / "log", PIER_GPUS="1") as server:
        server.wait_ready(120)
        info = httpx.get(server.url + "/info", timeout=10).json()
        assert info["model_device_type"] != "cpu" and info["pier_devices"][0] != "CPU"
        assert "ready in" in server.output() and " on CPU:" not in server.output()
        # n choices over one prompt evaluation, log-probabilities, and a grammar, all on the GPU
        answer = _complete(server.url, n=2, logprobs=2)
        assert len(answer["choices"]) == 2 and answer["choices"][0]["logprobs"]["top_logprobs"]
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        chat = httpx.post(server.url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": "json"}], "max_tokens": 40, "temperature": 0,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}).json()
        assert isinstance(json.loads(chat["choices"][0]["message"]["content"])["a"], int)
        # the prefix cache: a prompt sent again is not computed again
        long_prompt = " ".join(["the lazy dog sleeps"] * 40)
        _complete(server.url, prompt=long_prompt, max_tokens=2)
        again = _complete(server.url, prompt=long_prompt, max_tokens=2)
        assert again["timings"]["cache_n"] > 100


def test_a_copy_holding_no_gpu_stays_on_the_cpu(small_gguf: Path, tmp_path: Path) -> None:
    with ContainerProcess(_folder(small_gguf, tmp_path), tmp_path / "log", PIER_GPUS="0") as server:
        server.wait_ready(120)
        assert httpx.get(server.url + "/info", timeout=10).json()["model_device_type"] == "cpu"
        assert _complete(server.url)["choices"][0]["text"]


def test_a_model_too_big_for_its_gpu_says_what_it_needs(small_gguf: Path, tmp_path: Path) -> None:
    huge = str(max(d.total_bytes for d in gpus()) // 2**20 * 2)  # a KV cache of twice the GPU's memory
    with ContainerProcess(_folder(small_gguf, tmp_path), tmp_path / "log", PIER_GPUS="1",
                          PIER_KV_CACHE_MB=huge) as server:
        assert server.wait(120) == 1
    assert "needs about" in server.output() and "PIER_GPU_LAYERS" in server.output()


def test_embeddings_on_a_gpu(embedding_ggufs: dict[str, Path], tmp_path: Path) -> None:
    with ContainerProcess(_folder(embedding_ggufs["mean"], tmp_path), tmp_path / "log", PIER_GPUS="1") as server:
        server.wait_ready(120)
        response = httpx.post(server.url + "/v1/embeddings", json={"input": ["a b c", "d e"]}, timeout=60)
        assert response.status_code == 200, response.text
        assert len(response.json()["data"]) == 2
