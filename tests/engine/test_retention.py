"""The retention budget alone (pure), then the prefix cache keeping to it inside the engine."""

from __future__ import annotations

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import GenerateRequest, SamplingParams
from pier.engine.retention import RetentionBudget

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)
A = list(range(1, 41))  # a 40-token prompt that was evicted
B = list(range(100, 140))


@pytest.mark.parametrize(
    ("evicted", "prompt", "reused", "regret", "remembered_after"),
    [
        ([], A, 0, 0, 0),  # nothing evicted: no regret
        ([A], B, 0, 0, 1),  # unrelated prompt: the evicted one stays remembered
        ([A], [*A, 7], 0, 40, 0),  # the whole evicted prompt comes back: 40 tokens of regret, counted once
        ([A], [*A, 7], 30, 10, 0),  # a live prefix gave 30 of them: only the 10 more count
        ([A], [*A, 7], 40, 0, 1),  # a live prefix gave as much: no regret
        ([A], [*A[:20], 9, 9], 0, 20, 0),  # a partial match counts its length
        ([A], A, 0, 39, 0),  # one token is always evaluated for logits
        ([B, A], [*A, 1], 0, 40, 1),  # the best of several; the other is kept
    ],
)
def test_regret_is_what_an_evicted_prefix_would_have_saved(
    evicted: list[list[int]], prompt: list[int], reused: int, regret: int, remembered_after: int
) -> None:
    budget = RetentionBudget(floor=64, ceiling=1024)
    for tokens in evicted:
        budget.evicted(tokens)
    assert budget.admitted(prompt, reused) == regret
    assert budget.cells == 64 + regret
    assert len(budget.evicted_prompts) == remembered_after


@pytest.mark.parametrize(
    ("regret", "finished", "cells"),
    [(0.0, 10, 64), (640.0, 0, 704), (640.0, 64, 64 + round(640 * (1 - 1 / 64) ** 64)), (10_000.0, 0, 1024)],
)
def test_budget_fades_with_finished_requests_and_never_exceeds_the_cache(
    regret: float, finished: int, cells: int
) -> None:
    budget = RetentionBudget(floor=64, ceiling=1024, regret=regret)
    for _ in range(finished):
        budget.finished()
    assert budget.cells == cells


def test_evicted_prompts_are_remembered_up_to_a_limit() -> None:
    budget = RetentionBudget(floor=0, ceiling=100, remembered=2)
    for start in (0, 100, 200):
        budget.evicted(list(range(start, start + 5)))
    assert [p[0] for p in budget.evicted_prompts] == [100, 200]


def unique(i: int, n: int = 40) -> list[int]:
    return [1] + [3 + (i * 37 + k * 11) % 250 for k in range(n - 1)]


def greedy(rid: str, prompt: list[int], n: int = 4) -> GenerateRequest:
    return GenerateRequest(rid, prompt, GREEDY, max_tokens=n, ignore_eos=True)


def engine(floor: int = 64) -> EngineCore:
    return EngineCore(FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=64),
                      EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=floor))


def test_unique_prompts_keep_idle_cells_within_the_floor_plus_the_newest() -> None:
    core = engine(floor=64)
    for i in range(20):
        run(core, greedy(f"r{i}", unique(i)))
        assert core.prefix.speculative_cells <= 64 + 44  # the floor, and the newest 40 + 4 tokens whatever its size
    assert core.kv.used_cells <= 64 + 44
    assert core.stats().prefix_budget_cells == 64


def test_a_returning_chat_misses_once_then_its_turns_are_kept() -> None:
    core = engine(floor=0)
    conversation = unique(0, 200)
    reply = run(core, greedy("turn1", conversation)).tokens("turn1")
    run(core, greedy("other", unique(1)))  # turn 1 is evicted: over the budget and no longer the newest
    conversation = [*conversation, *reply, 5, 6]
    missed = run(core, greedy("turn2", conversation))
    assert missed.last("turn2").timings.cached_n == 1  # only BOS, from the newest prefix
    assert core.stats().prefix_budget_cells > 190  # the regret: the rest of the evicted turn was wanted
    reply = missed.tokens("turn2")
    for turn in range(3, 10):  # other users' unique prompts in between no longer push the chat out
        run(core, greedy(f"other{turn}", unique(turn)))
        conversation = [*conversation, *reply, 5, 6]
        out = run(core, greedy(f"turn{turn}", conversation))
        # all but the new message and the reply's last token (sampled, never fed back)
        assert out.last(f"turn{turn}").timings.cached_n == len(conversation) - 3
        reply = out.tokens(f"turn{turn}")


def test_a_shared_system_prompt_stays_and_the_users_parts_go() -> None:
    core = engine(floor=0)
    system = unique(99, 30)
    for i in range(10):
        run(core, greedy(f"r{i}", [*system, *unique(i)[1:]]))
    assert core.stats().cached_prompt_tokens == 9 * 30
    assert core.stats().prefix_budget_cells == 0  # no regret: nothing evicted was asked for again
    newest = 30 + 39 + 3  # its last token was sampled, never fed back
    assert core.kv.used_cells == newest  # the others were cut back to the system prompt, which it shares


def test_a_cache_that_is_off_keeps_nothing() -> None:
    core = EngineCore(FakeRunner(n_ctx=1024, n_seq_max=32, n_batch=64), EngineConfig(prefix_cache=False))
    run(core, greedy("a", unique(0)))
    assert core.kv.used_cells == 0 and core.stats().prefix_budget_cells == 0


# -- the return rate: whether prefixes leaving the KV cache are worth copying to host memory ----------------------


@pytest.mark.parametrize(
    ("events", "worth"),
    [
        ("", True),  # nothing known: copy (the count starts at 1 of 1)
        ("d" * 30, True),  # 1 of 31 >= 1/32
        ("d" * 32, False),  # 1 of 33
        ("d" * 100 + "r" * 10, True),  # 11 of 101
        ("d" * 100 + "r" * 2, False),  # 3 of 101
        ("d" * 100 + "f" * 200 + "dr" * 5, True),  # recent returns outweigh old departures, which faded
        ("d" * 100 + "f" * 200 + "d" * 10, False),  # fading alone changes nothing: only new events do
    ],
)
def test_copying_to_host_memory_follows_the_return_rate(events: str, worth: bool) -> None:
    """Events: d a prefix left the KV cache, r a prompt came back to one, f a request finished."""
    budget = RetentionBudget(floor=0, ceiling=100)
    act = {"d": budget.left_device, "r": budget.came_back, "f": budget.finished}
    for event in events:
        act[event]()
    assert budget.worth_saving is worth


def test_a_regret_counts_as_a_return() -> None:
    budget = RetentionBudget(floor=0, ceiling=1000)
    for _ in range(99):
        budget.left_device()
    assert not budget.worth_saving
    budget.evicted(A)
    budget.admitted([*A, 1], 0)
    assert budget.return_rate == pytest.approx(2 / 100)
    budget.came_back()
    budget.came_back()
    assert budget.worth_saving


def test_unique_prompts_stop_filling_host_memory_and_a_returning_chat_turns_it_back_on() -> None:
    core = EngineCore(FakeRunner(n_ctx=1024, n_seq_max=64, n_batch=64),
                      EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 30))
    for i in range(60):
        run(core, greedy(f"u{i}", unique(i)))
    host = core.prefix.host
    assert host is not None and core.prefix.budget is not None
    saved = host.stats.saved
    assert 10 < saved < 40 and not core.prefix.budget.worth_saving  # it copied until it learned nothing came back
    chat = [1] + [260 + k * 7 % 12 for k in range(99)]  # word tokens: shares nothing with the unique prompts
    reply = run(core, greedy("t1", chat)).tokens("t1")
    run(core, greedy("other", unique(70)))  # the chat's first turn is cut back: not copied now
    assert host.stats.saved == saved
    second = [*chat, *reply, 5, 6]
    reply = run(core, greedy("t2", second)).tokens("t2")  # it comes back: a regret, so a return
    run(core, greedy("t3", [*second, *reply, 7, 8]))  # and again: one return in 32 finished requests or more
    for i in range(3):
        run(core, greedy(f"v{i}", unique(80 + i)))
    assert core.prefix.budget.worth_saving and host.stats.saved > saved
