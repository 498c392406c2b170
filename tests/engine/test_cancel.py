"""A cancelled request frees its sequence at once and keeps what it computed as an idle prefix."""

from __future__ import annotations

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import Collector, run

GREEDY = SamplingParams(temperature=0.0)


def prompt(n: int, seed: int = 0) -> list[int]:
    return [1] + [3 + (seed * 31 + i * 7) % 250 for i in range(n - 1)]


def greedy(rid: str, tokens: list[int], n: int = 8) -> GenerateRequest:
    return GenerateRequest(rid, tokens, GREEDY, max_tokens=n, ignore_eos=True)


def new_core(n_ctx: int = 2048, step_tokens: int = 64) -> tuple[EngineCore, FakeRunner]:
    fake = FakeRunner(n_ctx=n_ctx, n_seq_max=32, n_batch=64)
    return EngineCore(fake, EngineConfig(max_running=4, step_tokens=step_tokens)), fake


def start(core: EngineCore, req: GenerateRequest, steps: int) -> Collector:
    out = Collector()
    core.add(core.prepare(req, out))
    for _ in range(steps):
        core.step()
    return out


def uncached(req: GenerateRequest) -> list[int]:
    core = EngineCore(FakeRunner(n_ctx=2048, n_seq_max=8, n_batch=64), EngineConfig(prefix_cache=False))
    return run(core, req).tokens(req.request_id)


@pytest.mark.parametrize(
    ("steps", "computed"),
    [
        (0, 0),  # cancelled before its first step: nothing computed, nothing kept
        (3, 3 * 64),  # mid-prompt: the three 64-token chunks the completed steps wrote
        (9, 520),  # the whole 520-token prompt (nine chunks), cancelled after its first token
        (12, 520 + 3),  # and three generated tokens fed back
    ],
)
def test_a_cancelled_sequence_keeps_exactly_what_completed_steps_computed(steps: int, computed: int) -> None:
    core, fake = new_core()
    out = start(core, greedy("x", prompt(520), n=100), steps)
    assert core.abort("x")
    assert out.last("x").finish_reason is FinishReason.ABORT
    assert core.stats().running == 0 and not core.has_work  # the sequence is gone at once
    assert core.kv.used_cells == fake.used_cells == computed
    assert core.stats().cached_prefixes == (1 if computed else 0)
    if computed:
        (kept,) = core.kv.slots.values()
        assert kept.tokens == fake.tokens_of(kept.seq_id) == (prompt(520) + out.tokens("x"))[:computed]


def test_a_request_sharing_512_tokens_with_a_cancelled_one_pays_only_for_its_suffix() -> None:
    """TTFT, counted in the tokens the engine evaluates before the first token (not wall-clock, so not flaky)."""
    core, fake = new_core()
    shared = prompt(512, seed=4)
    start(core, greedy("reader", [*shared, 7, 8], n=200), steps=9)  # its first token, then the client hangs up
    core.abort("reader")
    before = fake.decoded_tokens
    second = greedy("next", [*shared, 20, 21, 22, 23], n=1)
    out = run(core, second)
    timings = out.last("next").timings
    assert timings is not None and timings.cached_n == 512 and timings.prompt_n == 4
    assert fake.decoded_tokens - before == 4  # the suffix: one step, then the first token
    assert out.tokens("next") == uncached(second)


def test_a_prompt_cancelled_mid_chunk_is_resumed_from_its_computed_part() -> None:
    core, fake = new_core()
    long = prompt(400, seed=5)
    start(core, greedy("a", long), steps=2)  # 128 of 400 computed
    core.abort("a")
    before = fake.decoded_tokens
    out = run(core, greedy("b", long))
    assert out.last("b").timings.cached_n == 128
    assert fake.decoded_tokens - before == (400 - 128) + 7
    assert out.tokens("b") == uncached(greedy("b", long))


def test_a_kept_cancelled_prefix_gives_way_under_kv_pressure() -> None:
    core, fake = new_core(n_ctx=256)
    start(core, greedy("a", prompt(200, seed=6), n=50), steps=5)
    core.abort("a")
    assert fake.used_cells > 0
    other = greedy("b", prompt(200, seed=7), n=40)
    out = run(core, other)
    assert out.tokens("b") == uncached(other) and fake.used_cells <= 256


def test_cancelling_a_waiting_request_keeps_nothing_and_its_neighbour_runs_on() -> None:
    fake = FakeRunner(n_ctx=512, n_seq_max=8, n_batch=64)
    core = EngineCore(fake, EngineConfig(max_running=1, step_tokens=64))
    out = Collector()
    for rid, seed in (("a", 1), ("b", 2)):
        core.add(core.prepare(greedy(rid, prompt(5, seed)), out))
    core.step()
    core.abort("b")
    assert out.last("b").finish_reason is FinishReason.ABORT and out.last("b").token_ids == ()
    while core.has_work:
        core.step()
    assert out.last("a").finish_reason is FinishReason.LENGTH
    assert out.tokens("a") == uncached(greedy("a", prompt(5, 1)))
