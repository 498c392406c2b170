"""n-gram speculation (SPECULATE) on a real copy over llama.cpp: the SMALL model in F32 with flash attention off,
whose results do not depend on how tokens are batched, writes with drafts exactly the text it writes without, and
its /metrics count the drafted tokens it kept."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e

PROMPT = "the quick brown fox jumps over the lazy dog, " * 6  # a history to draft from


@pytest.fixture(scope="module")
def f32_dir(small_f32_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("small-f32")
    (folder / "model.gguf").symlink_to(small_f32_gguf)
    return folder


def generate(server: ContainerProcess, seed: int | None) -> list[str]:
    sampling = {"temperature": 0} if seed is None else {"temperature": 0.8, "seed": seed}
    answers = []
    for prompt in (PROMPT, "one two three four " * 8):
        body = {"prompt": prompt, "max_tokens": 48, "ignore_eos": True, **sampling}
        answers.append(httpx.post(server.url + "/v1/completions", json=body, timeout=120).json()["choices"][0]["text"])
    return answers


def counter(server: ContainerProcess, name: str) -> float:
    lines = httpx.get(server.url + "/metrics", timeout=10).text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name + "_total"))


def test_drafted_text_is_the_text_written_without_drafts(f32_dir: Path, tmp_path: Path) -> None:
    answers = {}
    for speculate in ("0", "4"):
        with ContainerProcess(f32_dir, tmp_path / f"log-{speculate}", SPECULATE=speculate,
                              PIER_FLASH_ATTENTION="false", PIER_HOST_CACHE_MB="0") as server:
            server.wait_ready(timeout=120)
            answers[speculate] = [*generate(server, None), *generate(server, 5)]
            drafted, kept = counter(server, "pier_draft_tokens"), counter(server, "pier_draft_kept_tokens")
        if speculate == "0":
            assert drafted == kept == 0
        else:
            assert drafted > 0 and 0 <= kept <= drafted
    assert answers["4"] == answers["0"]
