"""The prefix cache over a sliding-window model's memory (the FakeRunner's window, at its most forgetful: what
llama.cpp's iSWA cache may drop, it has dropped): a prompt reuses a prefix only where the window it needs is still
held, so every answer is the one computed without the cache."""

from __future__ import annotations

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)
WINDOW = 32


def request(rid: str, prompt: list[int], n: int = 12) -> GenerateRequest:
    return GenerateRequest(rid, prompt, GREEDY, max_tokens=n, ignore_eos=True)


def fresh_answer(prompt: list[int], n: int = 12) -> list[int]:
    """The answer with nothing reused: the oracle (the fake's logits are a function of what it holds)."""
    core = EngineCore(FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=64, window=WINDOW),
                      EngineConfig(max_running=8, step_tokens=64, prefix_cache=False))
    return run(core, request("x", prompt, n)).tokens("x")


def engine(host: bool) -> EngineCore:
    fake = FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=64, window=WINDOW)
    return EngineCore(fake, EngineConfig(max_running=8, step_tokens=64, host_cache_bytes=(1 << 24) if host else 0))


LONG = [1] + [3 + (i * 7) % 250 for i in range(160)]  # 161 tokens: five windows


@pytest.mark.parametrize("host", [False, True])
def test_a_prompt_sharing_the_start_of_a_long_one_is_answered_as_if_nothing_were_cached(host: bool) -> None:
    """The issue's shape, scaled to the window: a long prompt, then a shorter one sharing its start. The long one's
    window layers no longer hold what the shorter one's next token needs, so it is computed afresh."""
    core = engine(host)
    run(core, request("long", LONG))
    short = [*LONG[:80], 200, 201, 202]
    got = run(core, request("short", short))
    assert got.last("short").finish_reason is FinishReason.LENGTH
    assert got.tokens("short") == fresh_answer(short)


@pytest.mark.parametrize("host", [False, True])
def test_the_next_turn_still_reuses_the_whole_previous_one(host: bool) -> None:
    """What the window keeps is what a conversation's next turn needs: it goes on from the whole previous turn,
    forked on the device or restored from host memory."""
    core = engine(host)
    first = run(core, request("turn1", LONG))
    turn2 = LONG + first.tokens("turn1") + [200, 201, 202]
    got = run(core, request("turn2", turn2))
    assert got.tokens("turn2") == fresh_answer(turn2)
    assert core.stats().cached_prompt_tokens >= len(LONG) + 11  # the whole first turn but its last token
    if host:
        assert core.stats().restored_prompt_tokens > 0


def test_a_prefix_whose_window_is_still_held_is_forked() -> None:
    """A finished sequence shorter than the window lost nothing: any prefix of it is reused."""
    core = engine(host=False)
    run(core, request("a", LONG[:20], n=6))  # 26 positions: the window holds them all
    b = [*LONG[:15], 200, 201]
    assert run(core, request("b", b)).tokens("b") == fresh_answer(b)
    assert core.stats().cached_prompt_tokens == 15


def test_eight_prompts_sharing_a_long_prefix_at_once_are_each_answered_exactly() -> None:
    """c=8: after a long prompt, eight that share its start at lengths on both sides of the window."""
    core = engine(host=True)
    run(core, request("long", LONG))
    prompts = {f"p{i}": [*LONG[:60 + 13 * i], 200 + i, 201] for i in range(8)}
    got = run(core, *(request(rid, p) for rid, p in prompts.items()))
    for rid, prompt in prompts.items():
        assert got.last(rid).finish_reason is FinishReason.LENGTH
        assert got.tokens(rid) == fresh_answer(prompt), rid
