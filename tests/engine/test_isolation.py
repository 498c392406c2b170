"""A step whose llama_decode fails fails only the sequence that caused it: the FakeRunner fails every decode that
carries a chosen token (one request's prompt), as llama.cpp refuses a batch for one sequence's rows."""

from __future__ import annotations

import numpy as np
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.isolation import Part, batch_of, decode_apart
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.runner import KvCacheFull

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)
POISON = 0  # <unk>: never sampled (the fake keeps it at -10), so only a prompt (or a script) carries it


def requests() -> list[GenerateRequest]:
    prompts = [[1] + [10 + i + j for j in range(20 + 7 * i)] for i in range(8)]
    prompts[5] = [*prompts[5][:10], POISON, *prompts[5][10:]]
    return [GenerateRequest(f"r{i}", p, GREEDY, max_tokens=16, ignore_eos=True) for i, p in enumerate(prompts)]


def alone(req: GenerateRequest) -> list[int]:
    core = EngineCore(FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=256), EngineConfig(max_running=8, step_tokens=256))
    return run(core, req).tokens(req.request_id)


def test_one_sequence_that_breaks_llama_decode_fails_alone() -> None:
    """8 requests in one batch, one of which every llama_decode refuses: the other 7 are answered exactly as
    alone, and the bad one ends with an error that says what happened (before: the step raised, and the engine
    failed all 8)."""
    fake = FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=256)
    fake.fail_decodes(POISON)
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=256))
    reqs = requests()
    got = run(core, *reqs)
    for req in reqs:
        if req.request_id == "r5":
            last = got.last("r5")
            assert last.finish_reason is FinishReason.ERROR
            assert last.error is not None and "requests beside it went on" in last.error
            assert "status -1" in last.error
        else:
            assert got.last(req.request_id).finish_reason is FinishReason.LENGTH
            assert got.tokens(req.request_id) == alone(req)
    assert not core.has_work and core.kv.used_cells == fake.used_cells  # the failed one's KV was freed


def test_a_sequence_that_fails_once_is_computed_again_and_answered() -> None:
    """A failure caused by what the sequence reused (or anything that does not come back) costs it one
    recomputation from an empty slot, and it is answered as alone."""
    fake = FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=256)
    fake.fail_decodes(POISON, times=1)
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=256))
    reqs = requests()
    got = run(core, *reqs)
    for req in reqs:
        assert got.last(req.request_id).finish_reason is FinishReason.LENGTH
        assert got.tokens(req.request_id) == alone(req)


def test_a_failure_while_generating_fails_only_that_stream() -> None:
    """The bad token is one a stream wrote (scripted), mid-generation, beside 7 other streams."""
    fake = FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=256, script={60: POISON})
    fake.fail_decodes(POISON)
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=256))
    reqs = [GenerateRequest(f"r{i}", [1] + [10 + i] * (20 + 3 * i), GREEDY, max_tokens=20, ignore_eos=True)
            for i in range(8)]
    got = run(core, *reqs)
    failed = [r.request_id for r in reqs if got.last(r.request_id).finish_reason is FinishReason.ERROR]
    assert failed == ["r7"]  # the only one whose history reaches 60 tokens (42 + 20 at most)
    assert all(got.last(r.request_id).finish_reason is FinishReason.LENGTH for r in reqs if r.request_id != "r7")


def part(seq_id: int, tokens: list[int]) -> Part:
    return Part(seq_id, 0, tokens, want_logits=True, every=False)


def test_decode_apart_keeps_what_ran_in_order_and_names_what_failed() -> None:
    fake = FakeRunner(n_ctx=64, n_seq_max=8, n_batch=64)
    fake.fail_decodes(POISON)
    parts = [part(0, [1, 5]), part(1, [1, POISON]), part(2, [1, 7]), part(3, [1, 8])]
    outcome = decode_apart(fake, parts, fake.info.n_vocab)
    assert outcome.ran == [parts[0], parts[2], parts[3]]
    assert [p for p, _ in outcome.failed] == [parts[1]]
    assert outcome.logits.shape == (3, fake.info.n_vocab)
    alone_fake = FakeRunner(n_ctx=64, n_seq_max=8, n_batch=64)
    for row, p in zip(outcome.logits, outcome.ran, strict=True):
        assert np.array_equal(row, alone_fake.decode(batch_of([p]))[0])
    assert fake.tokens_of(1) == [] and fake.tokens_of(2) == [1, 7]


def test_decode_apart_takes_back_what_ran_when_the_cells_run_out() -> None:
    """KvCacheFull still means nothing changed: the halves that had run are removed again."""
    fake = FakeRunner(n_ctx=5, n_seq_max=8, n_batch=64)
    fake.fail_decodes(POISON)
    parts = [part(0, [1, 5]), part(1, [1, POISON]), part(2, [1, 7, 8, 9])]
    with pytest.raises(KvCacheFull):
        decode_apart(fake, parts, fake.info.n_vocab)
    assert fake.used_cells == 0
