"""Log-probabilities from the engine, against the fake runner's own logits for the same history: generated tokens
(with top alternatives, after the logit bias), prompt tokens (with chunked prefill, a cached prefix and a
preemption in the way), and nothing for requests that do not ask."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.logprobs import TokenLogprob, log_softmax, log_sum_exp, top_tokens
from pier.engine.request import GenerateRequest, SamplingParams

from .conftest import Collector, run

PROMPT = [1] + [3 + (i * 7) % 250 for i in range(40)]


def reference(fake: FakeRunner, history: list[int], bias: dict[int, float]) -> np.ndarray:
    row = fake._logits(history).copy()
    for token, b in bias.items():
        row[token] += b
    return log_softmax(row)


@pytest.mark.parametrize("sampling", [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.3, seed=3, top_k=5, logit_bias={5: 2.0, 40: -1.0}),
    SamplingParams(temperature=0.0, grammar='root ::= [a-z]+ " " [a-z]+'),
], ids=["greedy", "sampled-biased", "grammar"])
def test_generated_tokens_carry_their_log_softmax(sampling: SamplingParams) -> None:
    fake = FakeRunner()
    request = GenerateRequest("a", PROMPT, sampling, max_tokens=6, logprobs=3)
    out = run(EngineCore(fake, EngineConfig(max_running=4, step_tokens=16)), request)
    lps = [lp for chunk in out.chunks["a"] for lp in chunk.logprobs]
    history = list(PROMPT)
    assert len(lps) == len(out.tokens("a"))
    for token, lp in zip(out.tokens("a"), lps, strict=True):
        ref = reference(fake, history, dict(sampling.logit_bias))
        assert lp.token == token and lp.logprob == pytest.approx(ref[token], abs=1e-6)
        assert [t for t, _ in lp.top] == list(np.argsort(-ref, kind="stable")[:3])
        history.append(token)


def test_prompt_tokens_carry_theirs_through_chunks_a_cached_prefix_and_a_preemption() -> None:
    fake = FakeRunner(n_ctx=160, n_batch=16)
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=16))
    run(core, GenerateRequest("warm", PROMPT, SamplingParams(temperature=0.0), max_tokens=2))  # caches the prompt
    request = GenerateRequest("a", PROMPT, SamplingParams(temperature=0.0), max_tokens=40, prompt_logprobs=2)
    crowd = [GenerateRequest(f"c{i}", [1, 9 + i] * 20, SamplingParams(temperature=0.0), max_tokens=60)
             for i in range(2)]
    out = run(core, *crowd, request)  # the newest, so the one preempted when the cache fills
    assert core.stats().preemptions > 0
    alone = run(EngineCore(FakeRunner(n_ctx=160, n_batch=16)), request)
    assert out.tokens("a") == alone.tokens("a")
    firsts = [c.prompt_logprobs for c in out.chunks["a"] if c.prompt_logprobs is not None]
    assert len(firsts) == 1  # handed out once, on the first chunk
    prompt_lps = firsts[0]
    assert prompt_lps[0] is None and len(prompt_lps) == len(PROMPT)
    for i in range(1, len(PROMPT)):
        ref = reference(fake, PROMPT[:i], {})
        lp = prompt_lps[i]
        assert isinstance(lp, TokenLogprob) and lp.token == PROMPT[i]
        assert lp.logprob == pytest.approx(ref[PROMPT[i]], abs=1e-6) and len(lp.top) == 2


def test_nothing_is_computed_for_requests_that_do_not_ask() -> None:
    out = run(EngineCore(FakeRunner()), GenerateRequest("a", PROMPT, SamplingParams(temperature=0.0), max_tokens=5))
    assert all(not c.logprobs and c.prompt_logprobs is None for c in out.chunks["a"])


def test_top_tokens_are_best_first_and_bounded() -> None:
    lp = log_softmax(np.array([0.0, 3.0, 1.0, 2.0], dtype=np.float32))
    assert [t for t, _ in top_tokens(lp, 3)] == [1, 3, 2]
    assert [t for t, _ in top_tokens(lp, 10)] == [1, 3, 2, 0]
    assert top_tokens(lp, 0) == ()
    assert np.exp(lp).sum() == pytest.approx(1.0)


@pytest.mark.parametrize("k", [1, 5, 8, 9, 20])
def test_top_tokens_agree_with_a_full_sort(k: int) -> None:
    row = np.random.default_rng(k).normal(0, 3, 5000).astype(np.float32)
    lp = log_softmax(row)
    got = top_tokens(row, k, log_sum_exp(row))
    assert [t for t, _ in got] == list(np.argsort(-lp, kind="stable")[:k])
    assert [v for _, v in got] == pytest.approx(sorted(lp, reverse=True)[:k], abs=1e-6)


@pytest.mark.parametrize("cut", [1, 4])
def test_a_continuation_carries_the_log_probabilities_of_the_tokens_it_replays(cut: int) -> None:
    request = GenerateRequest("a", PROMPT, SamplingParams(temperature=1.0, seed=9), max_tokens=8, logprobs=2,
                              prompt_logprobs=1)
    whole = run(EngineCore(FakeRunner()), request)
    tokens = whole.tokens("a")
    resumed = run(EngineCore(FakeRunner()), replace(request, continuation=tokens[:cut]))
    first = resumed.chunks["a"][0]
    assert first.replayed and len(first.logprobs) == cut
    assert resumed.tokens("a") == tokens

    def logprobs(out: Collector) -> list[object]:
        return [lp for chunk in out.chunks["a"] for lp in chunk.logprobs]
    assert logprobs(resumed) == logprobs(whole)
    assert first.prompt_logprobs == whole.chunks["a"][0].prompt_logprobs
