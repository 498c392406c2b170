"""The host-memory tier alone (pure), then the engine saving evicted prefixes there and restoring them exactly."""

from __future__ import annotations

import itertools
import random

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.host_cache import HostCache
from pier.engine.prefix_cache import LLAMA_MAX_SEQ, MIN_SAVED, sequence_ids
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import Collector, run

GREEDY = SamplingParams(temperature=0.0)
HEAD = list(range(100, 116))  # 16 tokens: the first min_tokens of every entry below


def tokens(*tail: int) -> list[int]:
    return [*HEAD, *tail]


def state(n: int) -> bytes:
    return bytes(n)


@pytest.mark.parametrize(
    ("entries", "prompt", "limit", "expected"),
    [
        ([], tokens(1, 2), 99, None),
        ([tokens(1, 2, 3)], tokens(1, 2, 3, 4), 99, (0, 19)),  # the whole entry
        ([tokens(1, 2, 3)], tokens(1, 2, 9), 99, (0, 18)),  # diverges after 18
        ([tokens(1, 2, 3)], tokens(1, 2, 3, 4), 17, (0, 17)),  # never past the limit (one token left for logits)
        ([tokens(1), tokens(1, 2, 3)], tokens(1, 2, 3), 99, (1, 19)),  # the longest of several
        ([tokens(1, 2, 3)], [*HEAD[:15], 7, 1, 2, 3], 99, None),  # other first tokens: filed elsewhere
        ([tokens(1, 2, 3)], HEAD[:15], 99, None),  # shorter than min_tokens: never worth a restore
    ],
)
def test_match_is_the_longest_common_prefix_of_at_least_min_tokens(
    entries: list[list[int]], prompt: list[int], limit: int, expected: tuple[int, int] | None
) -> None:
    host = HostCache(budget_bytes=10_000, min_tokens=16)
    kept = [host.put(e, state(10)) for e in entries]
    found = host.match(prompt, limit)
    if expected is None:
        assert found.entry is None and found.length == 0
    else:
        assert found.entry is kept[expected[0]] and found.length == expected[1]


@pytest.mark.parametrize(
    ("held", "candidate", "worth"),
    [
        ([], tokens(1, 2), True),
        ([tokens(1, 2, 3)], tokens(1, 2), False),  # an entry already begins with it
        ([tokens(1, 2, 3)], tokens(1, 2, 3), False),
        ([tokens(1, 2, 3)], tokens(1, 2, 3, 4), True),  # longer: the new one replaces the old
        ([tokens(1, 2, 3)], tokens(1, 5), True),
        ([], HEAD[:15], False),  # too short to matter
    ],
)
def test_worth_saving_only_what_host_memory_lacks(held: list[list[int]], candidate: list[int], worth: bool) -> None:
    host = HostCache(budget_bytes=10_000)
    for t in held:
        host.put(t, state(10))
    assert host.worth_saving(candidate) is worth


def test_an_entry_matches_and_holds_only_for_its_own_adapter() -> None:
    host = HostCache(budget_bytes=10_000)
    base = host.put(tokens(1, 2, 3), state(10))
    lora = host.put(tokens(1, 2, 3), state(10), adapter="a")
    assert host.match(tokens(1, 2, 3, 4), 99).entry is base
    assert host.match(tokens(1, 2, 3, 4), 99, "a").entry is lora
    assert host.match(tokens(1, 2, 3, 4), 99, "b").entry is None
    assert host.worth_saving(tokens(1, 2), "b") and not host.worth_saving(tokens(1, 2), "a")
    host.put(tokens(1, 2, 3, 4), state(10), adapter="a")  # replaces the adapter's own shorter entry only
    assert len(host) == 2 and host.match(tokens(1, 2, 3, 4), 99).entry is base


def test_a_longer_turn_replaces_the_entries_it_begins_with() -> None:
    host = HostCache(budget_bytes=10_000)
    host.put(tokens(1), state(10))
    host.put(tokens(9), state(10))  # another conversation: kept
    host.put(tokens(1, 2, 3), state(30))
    assert [e.tokens for e in host.entries] == [tokens(9), tokens(1, 2, 3)]
    assert host.nbytes == 40


def test_budget_in_bytes_least_recently_used_out() -> None:
    host = HostCache(budget_bytes=300)
    a, b, c = (host.put(tokens(i), state(100)) for i in (1, 2, 3))
    assert a is not None and b is not None and c is not None
    host.restored(a)  # a is the most recently used now
    host.put(tokens(4), state(100))
    assert [e.tokens[-1] for e in host.entries] == [3, 1, 4]
    assert host.nbytes == 300 and host.stats.evicted == 1 and host.stats.restored == 1
    assert host.put(tokens(5), state(301)) is None  # larger than the whole budget: not kept, nothing evicted
    assert host.put(HEAD[:10], state(10)) is None  # too short
    assert len(host.entries) == 3


@pytest.mark.parametrize(
    ("held", "candidate", "base", "worth"),
    [
        ([(tokens(1, 2, 3), 0)], tokens(1, 2), 16, False),  # a whole entry holds any part of it
        ([(tokens(1, 2, 3), 16)], tokens(1, 2, 3), 16, False),  # the same part
        ([(tokens(1, 2, 3), 16)], tokens(1, 2, 3), 0, True),  # a suffix cannot stand in for the whole
        ([(tokens(*range(20)), 18)], tokens(*range(20)), 17, True),  # nor for a longer suffix
    ],
)
def test_worth_saving_counts_what_a_suffix_leaves_out(held: list[tuple[list[int], int]], candidate: list[int],
                                                       base: int, worth: bool) -> None:
    host = HostCache(budget_bytes=10_000)
    for t, b in held:
        host.put(t, state(10), base=b)
    assert host.worth_saving(candidate, base=base) is worth


def test_a_suffix_replaces_only_suffixes_of_its_base_or_a_longer_one() -> None:
    host = HostCache(budget_bytes=10_000)
    system = host.put(tokens(*range(10)), state(26))  # a system prompt saved whole
    host.put(tokens(*range(20)), state(10), base=26)  # a chat's first turn, after the system prompt
    turn2 = host.put(tokens(*range(30)), state(20), base=26)
    assert host.entries == [system, turn2]  # turn 1 is inside turn 2; the system prompt is not (it is its base)
    assert host.put(tokens(*range(5)), state(5), base=19) is None  # under min_tokens past the base: not kept


def test_a_suffix_matches_only_where_its_base_is_usable_and_past_its_base() -> None:
    host = HostCache(budget_bytes=10_000)
    chat = host.put(tokens(*range(30)), state(20), base=26)
    assert host.match(tokens(*range(30), 99), 99, usable=lambda e, n: False).entry is None
    assert host.match(tokens(*range(30), 99), 99, usable=lambda e, n: True).entry is chat
    assert host.match(tokens(*range(8), 77), 99).entry is None  # shares only part of the base: nothing to restore


@pytest.mark.parametrize(
    ("parallel", "n_ctx", "ids"),
    [(8, 4096, LLAMA_MAX_SEQ), (8, 1024, 8 + 64), (1, 512, 33), (4, 65536, LLAMA_MAX_SEQ)],
)
def test_sequence_ids_cover_every_idle_prefix_the_cells_can_hold(parallel: int, n_ctx: int, ids: int) -> None:
    assert sequence_ids(parallel, n_ctx) == ids


# -- in the engine -----------------------------------------------------------------------------------------------


def unique(i: int, n: int) -> list[int]:
    return [1] + [3 + (i * 37 + k * 11) % 250 for k in range(n - 1)]


def greedy(rid: str, prompt: list[int], n: int = 8) -> GenerateRequest:
    return GenerateRequest(rid, prompt, GREEDY, max_tokens=n, ignore_eos=True)


def engine(n_ctx: int = 512, host_bytes: int = 1 << 20, runner: FakeRunner | None = None) -> EngineCore:
    runner = runner or FakeRunner(n_ctx=n_ctx, n_seq_max=64, n_batch=64)
    return EngineCore(runner, EngineConfig(max_running=4, step_tokens=64, host_cache_bytes=host_bytes))


def uncached(req: GenerateRequest) -> list[int]:
    core = EngineCore(FakeRunner(n_ctx=2048, n_seq_max=8, n_batch=64), EngineConfig(prefix_cache=False))
    return run(core, req).tokens(req.request_id)


def test_an_evicted_prefix_is_restored_from_host_memory_and_the_output_is_unchanged() -> None:
    core = engine()
    fake = core.runner
    assert isinstance(fake, FakeRunner)
    first = unique(0, 200)
    reply = run(core, greedy("turn1", first)).tokens("turn1")
    core.prefix.clear()  # every idle prefix leaves the KV cache (as KV pressure would make it)
    assert core.kv.used_cells == 0 and fake.saves == 1
    second = [*first, *reply, 5, 6]
    before = fake.decoded_tokens
    out = run(core, greedy("turn2", second))
    # restored: the first turn's prompt and all but the last reply token (sampled, never fed back)
    assert out.last("turn2").timings.cached_n == 200 + 7
    assert fake.decoded_tokens - before == 3 + 7  # the new tokens, then 7 decodes
    assert out.tokens("turn2") == uncached(greedy("turn2", second))
    stats = core.stats()
    assert stats.restored_prompt_tokens == 207 and stats.host_hit_rate == pytest.approx(207 / (200 + 210))
    assert stats.device_hit_rate == 0.0 and fake.restores == 1


def test_more_conversations_than_the_kv_cache_holds_come_back_from_host_memory() -> None:
    """12 conversations of 4 turns, interleaved (every conversation's next turn comes after all the others'),
    on 512 cells that hold about three of them: each turn after the first is restored, none recomputed."""
    core = engine(n_ctx=512)
    chats = {c: unique(c, 60) for c in range(12)}
    for turn in range(4):
        for c, prompt in chats.items():
            rid = f"c{c}t{turn}"
            out = run(core, greedy(rid, prompt))
            assert out.tokens(rid) == uncached(greedy(rid, prompt)), rid
            if turn:
                assert out.last(rid).timings.cached_n == len(prompt) - 3, rid  # all but the new message
            chats[c] = [*prompt, *out.tokens(rid), 5, 6]
    stats = core.stats()
    assert stats.restored_prompt_tokens > 0.5 * stats.cached_prompt_tokens
    assert core.kv.used_cells <= 512


class NoRoomToRestore(FakeRunner):
    def restore(self, seq_id: int, state: bytes | bytearray) -> bool:
        self.remove(seq_id)
        return False


def test_a_failed_restore_computes_the_prompt_instead() -> None:
    core = engine(runner=NoRoomToRestore(n_ctx=512, n_seq_max=64, n_batch=64))
    first = unique(1, 100)
    reply = run(core, greedy("a", first)).tokens("a")
    core.prefix.clear()
    second = [*first, *reply, 9]
    out = run(core, greedy("b", second))
    assert out.last("b").timings.cached_n == 0
    assert out.tokens("b") == uncached(greedy("b", second))


def test_without_host_memory_an_evicted_prefix_is_recomputed() -> None:
    core = engine(host_bytes=0)
    first = unique(2, 100)
    reply = run(core, greedy("a", first)).tokens("a")
    core.prefix.clear()
    out = run(core, greedy("b", [*first, *reply, 9]))
    assert out.last("b").timings.cached_n == 0 and core.stats().host_cache_entries == 0


def test_host_memory_stays_within_its_budget() -> None:
    fake = FakeRunner(n_ctx=512, n_seq_max=64, n_batch=64, state_bytes_per_token=64)
    core = engine(runner=fake, host_bytes=3 * 100 * 64)  # three 100-token prefixes
    for i in range(6):
        run(core, greedy(f"r{i}", unique(10 + i, 93)))
        core.prefix.clear()
    stats = core.stats()
    assert stats.host_cache_bytes <= 3 * 100 * 64 and stats.host_cache_entries == 3


def test_a_restore_is_cut_back_to_what_the_prompt_shares_and_drops_idle_copies() -> None:
    fake = FakeRunner(n_ctx=512, n_seq_max=64, n_batch=64)
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))
    first = unique(3, 200)
    run(core, greedy("a", first))  # 207 tokens, sent to host memory when it finished
    assert core.kv.used_cells == 0 and core.stats().host_cache_entries == 1
    run(core, greedy("b", [*first[:40], 9, 9]))  # restores 40 of them: branching off there makes them shared
    edited = [*first[:150], 7, 7]  # the saved prefix shares 150 tokens with this prompt, the device 40
    before = fake.decoded_tokens
    out = run(core, greedy("c", edited))
    assert out.last("c").timings.cached_n == 150
    assert fake.decoded_tokens - before == 2 + 7
    assert out.tokens("c") == uncached(greedy("c", edited))
    assert sorted(len(s) for s in core.kv.slots.values()) == [40, 150 + 2 + 7]  # b cut back to its shared part
    run(core, greedy("d", [*first[:180], 6, 6]))  # restores 180 tokens, which hold b's 40: b's copy is dropped
    assert sorted(len(s) for s in core.kv.slots.values()) == [150, 180 + 2 + 7]  # c cut back to its shared part
    assert core.kv.used_cells == fake.used_cells == 150 + 189


def test_while_saving_a_chat_history_leaves_whole_and_a_shared_system_prompt_stays() -> None:
    fake = FakeRunner(n_ctx=1024, n_seq_max=64, n_batch=64)
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))
    system = unique(5, 40)
    for user in range(4):  # four users of one system prompt: it is shared
        run(core, greedy(f"u{user}", [*system, *unique(10 + user, 30)[1:]]))
    chat = unique(20, 80)
    reply = run(core, greedy("t1", chat)).tokens("t1")
    run(core, greedy("x", unique(21, 30)))  # the newest now: the others are cut
    idle = [s.tokens for s in core.kv.slots.values() if not s.busy]
    assert system in idle  # kept for the next user to fork
    assert not any(t[:80] == chat for t in idle)  # the chat went to host memory whole (not shared)
    restored = core.stats().restored_prompt_tokens
    out = run(core, greedy("t2", [*chat, *reply, 5, 6]))
    assert out.last("t2").timings.cached_n == 80 + 7
    assert core.stats().restored_prompt_tokens == restored + 87
    out = run(core, greedy("u9", [*system, *unique(30, 30)[1:]]))
    assert out.last("u9").timings.cached_n == 40 and core.stats().restored_prompt_tokens == restored + 87


def chats_in_lockstep(core: EngineCore, turns: int, between: GenerateRequest | None = None) -> list[int]:
    """Four conversations whose turns start and end together (as users who answer at once); returns, per turn,
    the prompt tokens restored from host memory so far."""
    chats = {c: unique(40 + c, 50) for c in range(4)}
    restored = []
    for turn in range(turns):
        out = run(core, *(greedy(f"c{c}t{turn}", prompt) for c, prompt in chats.items()))
        chats = {c: [*p, *out.tokens(f"c{c}t{turn}"), 5, 6] for c, p in chats.items()}
        if between is not None:
            run(core, GenerateRequest(f"{between.request_id}{turn}", between.prompt, GREEDY, max_tokens=30,
                                      ignore_eos=True))
        restored.append(core.stats().restored_prompt_tokens)
    return restored


def lockstep_engine() -> EngineCore:
    return EngineCore(FakeRunner(n_ctx=2048, n_seq_max=64, n_batch=64),
                      EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))


@pytest.mark.parametrize("between", [None, greedy("other", unique(90, 20))])  # at once, or 30 steps later
def test_finished_turns_go_to_host_memory_and_every_next_turn_is_restored(between: GenerateRequest | None) -> None:
    """A turn's KV is written beside the other chats' (one cell each per decode step); sending it to host memory
    when it ends and restoring it writes the history back in one run of cells (prefix_cache.py)."""
    core = lockstep_engine()
    restored = chats_in_lockstep(core, turns=6, between=between)
    assert all(a < b for a, b in itertools.pairwise(restored))
    assert all(len(slot) - slot.shared < MIN_SAVED for slot in core.kv.slots.values())  # only shared parts stay


def test_a_turn_too_large_for_host_memory_stays_on_the_device() -> None:
    fake = FakeRunner(n_ctx=512, n_seq_max=64, n_batch=64, state_bytes_per_token=64)
    core = engine(runner=fake, host_bytes=50 * 64)
    prompt = unique(7, 100)
    reply = run(core, greedy("a", prompt)).tokens("a")
    assert core.stats().host_cache_entries == 0 and [len(s) for s in core.kv.slots.values()] == [107]
    out = run(core, greedy("b", [*prompt, *reply, 5]))
    assert out.last("b").timings.cached_n == 107 and core.stats().restored_prompt_tokens == 0


def test_random_chats_cancels_and_kv_pressure_never_change_an_answer() -> None:
    """Chats coming back in random order, cancellations mid-prompt or mid-answer, on 300 cells (so prefixes go to
    host memory and back, and sequences are preempted): every answer that completes is the uncached answer,
    and the engine's count of cells is llama.cpp's (here the fake's), after every step."""
    totals = [random_chats(seed) for seed in range(6)]
    assert all(restored for restored, _ in totals) and sum(preempted for _, preempted in totals) > 0


def test_random_chats_behind_one_system_prompt_never_change_an_answer() -> None:
    """The same, every chat starting with one system prompt: turns saved and restored after it, the system
    prompt itself evicted and restored whole now and then."""
    totals = [random_chats(seed, system=40) for seed in range(6)]
    assert all(restored for restored, _ in totals)


def random_chats(seed: int, system: int = 0) -> tuple[int, int]:
    rng = random.Random(seed)
    fake = FakeRunner(n_ctx=300, n_seq_max=64, n_batch=32)
    core = EngineCore(fake, EngineConfig(max_running=3, step_tokens=32, host_cache_bytes=1 << 20))
    head = unique(99, system + 1)  # BOS, then the system prompt
    chats = {c: unique(60 + c, rng.randrange(20, 60)) for c in range(6)}
    if system:
        chats = {c: [*head, *prompt[1:]] for c, prompt in chats.items()}
    out, started, ids = Collector(), {}, itertools.count()
    while len(started) < 40 or core.has_work:
        if len(started) < 40 and rng.random() < 0.3:
            c = rng.choice(list(chats))
            rid = f"r{next(ids)}"
            started[rid] = (c, list(chats[c]))
            core.add(core.prepare(greedy(rid, chats[c], n=rng.randrange(2, 70)), out))
        if started and rng.random() < 0.05:
            core.abort(rng.choice(list(started)))
        core.step()
        for rid, (c, prompt) in started.items():
            last = out.chunks[rid][-1] if out.chunks[rid] else None
            if last is not None and last.finished and chats[c] == prompt:
                chats[c] = [*prompt, *out.tokens(rid), 5, 6][: 120 + system]
        assert core.kv.used_cells == fake.used_cells
    for rid, (_, prompt) in started.items():
        if out.last(rid).finish_reason is FinishReason.LENGTH:
            assert out.tokens(rid) == uncached(greedy(rid, prompt, n=len(out.tokens(rid)))), (seed, rid)
    return core.stats().restored_prompt_tokens, core.stats().preemptions


def test_chats_behind_a_shared_system_prompt_save_and_restore_only_their_own_part() -> None:
    """Two chats branch off one system prompt; each finished turn goes to host memory from the system prompt on,
    and comes back after the copy of it the device keeps, shared, not written a second time."""
    fake = FakeRunner(n_ctx=1024, n_seq_max=64, n_batch=64, state_bytes_per_token=64)
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))
    system = unique(5, 60)
    chats = {c: [*system, *unique(10 + i, 30)[1:]] for i, c in enumerate("ab")}
    out = run(core, *(greedy(c, prompt) for c, prompt in chats.items()))  # b waits for a's prompt, then forks it
    chats = {c: [*prompt, *out.tokens(c), 5, 6] for c, prompt in chats.items()}
    host = core.prefix.host
    assert host is not None
    assert [(e.base, len(e.tokens), e.nbytes) for e in host.entries] == [(60, 89 + 7, (29 + 7) * 64)] * 2
    assert core.kv.used_cells == 60  # only the system prompt stays on the device
    for c, prompt in chats.items():
        core.add(core.prepare(greedy(f"{c}2", prompt), out))
    core.step()  # both admitted: each restores its own part after the system prompt both share
    a, b = (next(s for s in core.kv.slots.values() if s.busy and s.tokens[60:61] == chats[c][60:61]) for c in "ab")
    assert a.cells[:60] == b.cells[:60]
    assert core.kv.used_cells == fake.used_cells == 60 + 2 * (29 + 7 + 3)  # + the last reply token, 5, 6
    while core.has_work:
        core.step()
    for c, prompt in chats.items():
        assert out.last(f"{c}2").timings.cached_n == len(prompt) - 3
        assert out.tokens(f"{c}2") == uncached(greedy(f"{c}2", prompt))
    assert core.stats().restored_prompt_tokens == 2 * (89 + 7 - 60) and fake.restores == 2


def test_a_suffix_whose_base_left_the_device_is_not_restored() -> None:
    fake = FakeRunner(n_ctx=1024, n_seq_max=64, n_batch=64)
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=64, prefix_floor_cells=0, host_cache_bytes=1 << 20))
    system = unique(6, 60)
    chats = {c: [*system, *unique(30 + i, 30)[1:]] for i, c in enumerate("ab")}
    out = run(core, *(greedy(c, prompt) for c, prompt in chats.items()))
    core.prefix.clear()  # the system prompt leaves the device too (saved whole)
    nxt = [*chats["a"], *out.tokens("a"), 5, 6]
    again = run(core, greedy("a2", nxt))
    assert again.tokens("a2") == uncached(greedy("a2", nxt))
    assert again.last("a2").timings.cached_n == 60  # the system prompt, restored whole; a's own part recomputed
