"""n-gram speculation in the engine step (EngineConfig.speculate, engine/draft.py) over the fake runner, whose
logits are a function of a sequence's whole history: a draft's cells left behind, or a token taken from the wrong
row, would change what follows. The text is the one decoding without drafts writes, greedy or sampled; a history
that repeats itself is written in fewer steps."""

from __future__ import annotations

import re

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import Collector, run

HELLO, WORLD, THE, QUICK, BROWN, FOX, JUMPS, OVER, LAZY, DOG = range(259, 269)  # FakeRunner's words
PHRASE = [THE, QUICK, BROWN, FOX, JUMPS, OVER, THE, LAZY, DOG]
PROMPT = [1, HELLO, *PHRASE, WORLD, *PHRASE[:3]]  # the phrase, then its beginning again


def repeating(n_out: int, *, broken_at: tuple[int, ...] = ()) -> dict[int, int]:
    """A script that makes the greedy answer go on with the phrase (the history predicts it), except at the
    answer's positions in `broken_at`, where it writes HELLO instead (the draft is wrong there)."""
    start = len(PROMPT)
    return {start + i: HELLO if i in broken_at else PHRASE[(3 + i) % len(PHRASE)] for i in range(n_out)}


def request(rid: str, n: int, sampling: SamplingParams | None = None, **fields: object) -> GenerateRequest:
    return GenerateRequest(rid, list(PROMPT), sampling or SamplingParams(temperature=0.0), max_tokens=n,
                           ignore_eos=True, **fields)  # type: ignore[arg-type]


def generate(script: dict[int, int] | None, speculate: int, *requests: GenerateRequest
             ) -> tuple[Collector, EngineCore, FakeRunner]:
    fake = FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64, script=script)
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=64, speculate=speculate))
    return run(core, *requests), core, fake


def test_a_repeating_answer_is_the_same_in_far_fewer_steps() -> None:
    plain, _, slow = generate(repeating(40), 0, request("r", 40))
    drafted, core, fast = generate(repeating(40), 4, request("r", 40))
    assert drafted.tokens("r") == plain.tokens("r") and drafted.text("r") == plain.text("r")
    assert drafted.last("r").finish_reason is FinishReason.LENGTH and len(drafted.tokens("r")) == 40
    assert fast.decode_calls <= slow.decode_calls // 3, (fast.decode_calls, slow.decode_calls)
    stats = core.stats()
    assert stats.draft_kept_tokens >= 25 and stats.drafted_tokens >= stats.draft_kept_tokens
    assert stats.generated_tokens == 40
    assert fast.used_cells == core.kv.used_cells  # no draft cell left behind unaccounted


def test_wrong_drafts_cost_nothing_in_the_text() -> None:
    script = repeating(40, broken_at=(5, 6, 17, 30))
    plain, _, _ = generate(script, 0, request("r", 40))
    drafted, core, fake = generate(script, 4, request("r", 40))
    assert drafted.tokens("r") == plain.tokens("r")
    assert core.stats().drafted_tokens > core.stats().draft_kept_tokens > 0  # some drafts were cut short
    assert fake.used_cells == core.kv.used_cells


@pytest.mark.parametrize("sampling", [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=0.9, seed=7),
    SamplingParams(temperature=1.2, top_k=20, top_p=0.9, seed=3, repetition_penalty=1.1),
    SamplingParams(temperature=0.0, frequency_penalty=0.5, presence_penalty=0.3),
], ids=["greedy", "sampled", "truncated-and-penalized", "greedy-penalized"])
def test_every_sampling_writes_what_it_writes_without_drafts(sampling: SamplingParams) -> None:
    """Each token is sampled from its own row in order, drafted or not: the sampler's draws and penalties see the
    same tokens, so even sampled text is the same (the fake's logits do not depend on the batch)."""
    script = repeating(48, broken_at=(9, 25))
    requests = [request(f"r{i}", 48, sampling) for i in range(4)]
    plain, _, _ = generate(script, 0, *requests)
    drafted, core, fake = generate(script, 5, *requests)
    for r in requests:
        assert drafted.tokens(r.request_id) == plain.tokens(r.request_id)
    assert fake.used_cells == core.kv.used_cells


def test_a_stop_string_inside_a_draft_ends_the_answer_there() -> None:
    plain, _, _ = generate(repeating(40), 0, request("r", 40, stop=[" lazy"]))
    drafted, _, _ = generate(repeating(40), 4, request("r", 40, stop=[" lazy"]))
    assert drafted.text("r") == plain.text("r") and " lazy" not in drafted.text("r")
    assert drafted.last("r").finish_reason is FinishReason.STOP


@pytest.mark.parametrize("n", [1, 2, 5, 11])
def test_max_tokens_holds_exactly(n: int) -> None:
    drafted, _, _ = generate(repeating(40), 8, request("r", n))
    assert len(drafted.tokens("r")) == n and drafted.last("r").finish_reason is FinishReason.LENGTH


def test_logprobs_are_those_of_each_tokens_own_row() -> None:
    plain, _, _ = generate(repeating(30, broken_at=(12,)), 0, request("r", 30, logprobs=2))
    drafted, _, _ = generate(repeating(30, broken_at=(12,)), 4, request("r", 30, logprobs=2))
    lps = [lp for chunk in plain.chunks["r"] for lp in chunk.logprobs]
    assert [lp for chunk in drafted.chunks["r"] for lp in chunk.logprobs] == lps and len(lps) == 30


def test_a_grammar_holds_over_drafted_tokens() -> None:
    sampling = SamplingParams(temperature=0.0, grammar='root ::= (" the" | " quick" | " brown" | " fox")+')
    plain, _, _ = generate(repeating(30), 0, request("r", 12, sampling))
    drafted, _, _ = generate(repeating(30), 4, request("r", 12, sampling))
    assert drafted.tokens("r") == plain.tokens("r")
    assert re.fullmatch(r"( the| quick| brown| fox)*( t| th| the| q\w*| b\w*| f\w*| )?", drafted.text("r"))


def test_the_kept_history_serves_the_next_prompt_from_the_prefix_cache() -> None:
    """What a drafted answer leaves in the prefix cache is its real history: the next turn reuses it and writes
    what it writes without drafts."""
    first = request("a", 20)
    plain, _, _ = generate(repeating(60), 0, first)
    follow = GenerateRequest("b", [*PROMPT, *plain.tokens("a"), WORLD], SamplingParams(temperature=0.0), max_tokens=10,
                             ignore_eos=True)
    fake = FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64, script=repeating(60))
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=64, speculate=4))
    run(core, first)
    again = run(core, follow)
    reference = generate(repeating(60), 0, follow)[0]
    assert again.tokens("b") == reference.tokens("b")
    assert core.stats().cached_prompt_tokens >= len(PROMPT) + 19


def test_no_drafts_when_off_or_when_nothing_repeats() -> None:
    _, core, _ = generate(repeating(20), 0, request("r", 20))
    assert core.stats().drafted_tokens == 0
    _, core, _ = generate(None, 4, GenerateRequest("r", [1, 5, 6, 7, 8], SamplingParams(temperature=0.0),
                                                    max_tokens=3, ignore_eos=True))
    assert core.stats().drafted_tokens == 0
