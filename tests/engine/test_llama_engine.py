"""The engine on a real GGUF through llama.cpp: exactness against llama-cpp-python's `Llama`, the prefix
cache, KV exhaustion, cancellation and UTF-8, with real forward passes."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import KV_TYPES, LlamaRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.runner import Batch

from .conftest import run

pytestmark = pytest.mark.e2e
GREEDY = SamplingParams(temperature=0.0)
N_CTX = 2048


def random_prompt(n: int, n_vocab: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [1] + [rng.randrange(300, n_vocab) for _ in range(n - 1)]


def reference(llm: llama_cpp.Llama, prompt: list[int], n: int) -> tuple[list[int], np.ndarray]:
    """One prompt at a time through the high-level Llama class (the unbatched oracle): its greedy
    tokens and the logits it chose each one from."""
    llm.reset()
    out: list[int] = []
    for token in llm.generate(prompt, temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True):
        out.append(token)
        if len(out) == n:
            break
    rows = llm.scores[len(prompt) - 1 : len(prompt) - 1 + n] if llm._logits_all else np.empty((0, 0))
    return out, np.array(rows)


Outcome = tuple[list[int], list[int], np.ndarray]  # (engine tokens, oracle tokens, oracle logits)


def batched_vs_reference(gguf: Path, n_out: int = 24, logits: bool = True, kv_type: str = "f16") -> list[Outcome]:
    runner = LlamaRunner(gguf, n_ctx=N_CTX, n_seq_max=32, n_batch=512, n_threads=2, kv_type=kv_type)
    try:
        prompts = [random_prompt(n, runner.info.n_vocab, seed=n) for n in PROMPT_LENGTHS]
        core = EngineCore(runner, EngineConfig(max_running=8, step_tokens=512, prefix_cache=False))
        reqs = [GenerateRequest(f"r{i}", p, GREEDY, max_tokens=n_out, ignore_eos=True) for i, p in enumerate(prompts)]
        batched = run(core, *reqs)
    finally:
        runner.close()
    # flash attention: the engine's default (auto) resolves to on for the CPU backend
    ggml_kv = KV_TYPES[kv_type]
    llm = llama_cpp.Llama(str(gguf), n_ctx=N_CTX, n_batch=512, n_threads=2, flash_attn=True, logits_all=logits,
                          type_k=ggml_kv, type_v=ggml_kv, verbose=False)
    return [(batched.tokens(r.request_id), *reference(llm, p, n_out)) for r, p in zip(reqs, prompts, strict=True)]


@pytest.fixture(scope="module")
def runner(small_f32_gguf: Path) -> LlamaRunner:
    """F32 weights, so cached and uncached runs can be compared token for token."""
    runner = LlamaRunner(small_f32_gguf, n_ctx=N_CTX, n_seq_max=32, n_batch=512, n_threads=2)
    yield runner
    runner.close()


PROMPT_LENGTHS = (3, 17, 40, 64, 100, 150, 201, 260)  # 835 tokens: prompts are chunked across steps too


def assert_divergences_at_near_ties(results: list[Outcome], max_gap: float, max_diverged: int) -> None:
    """Each sequence matches the oracle token for token, or first differs where the oracle's two candidates
    were within `max_gap` logits of each other (the logits' spread is ~4); at most `max_diverged` differ."""
    diverged = 0
    for got, want, logits in results:
        if got == want:
            continue
        diverged += 1
        k = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
        gap = logits[k][want[k]] - logits[k][got[k]]
        assert 0 <= gap < max_gap, f"diverged at token {k} where the oracle preferred its pick by {gap:.5f}"
    assert diverged <= max_diverged, f"{diverged} of {len(results)} sequences diverged"


def test_batched_greedy_matches_llama_one_at_a_time(small_f32_gguf: Path) -> None:
    """F32 weights and KV cache, so no 8-bit or 16-bit rounding anywhere. Batching still changes which kernel
    runs (a batch of 8 decodes goes through tiled matrix products, a single token through dot products) and
    so the order of float additions: ~1e-7 relative, which this random 6-layer model amplifies to ~1e-3 in
    the logits. Measured on 8 prompts x 24 tokens: 7 sequences identical, 1 differs from token 19 where the
    oracle's top two were 0.0009 apart. Bound: divergence only at gaps under 0.005, in at most 1 of 8."""
    assert_divergences_at_near_ties(batched_vs_reference(small_f32_gguf, kv_type="f32"), 0.005, 1)


def test_quantized_model_differs_only_at_near_ties(small_gguf: Path) -> None:
    """Q4_0 weights make llama.cpp round activations to 8 bits before each product, and the KV cache is F16.
    Batching's ~1e-7 differences now and then tip a value to the next 8-bit step, which moves logits by up
    to ~0.05 (measured). Bound: divergence only at gaps under 0.1, in at most half the sequences
    (measured: 2-3 of 8 over 24 tokens)."""
    assert_divergences_at_near_ties(batched_vs_reference(small_gguf), 0.1, len(PROMPT_LENGTHS) // 2)


def test_shared_256_token_prefix_evaluates_only_the_suffix(runner: LlamaRunner) -> None:
    n_vocab = runner.info.n_vocab
    shared = random_prompt(256, n_vocab, seed=1)
    first = GenerateRequest("a", [*shared, 400, 401, 402], GREEDY, max_tokens=8, ignore_eos=True)
    second = GenerateRequest("b", [*shared, 500, 501, 502, 503], GREEDY, max_tokens=8, ignore_eos=True)
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512))
    run(core, first)
    out = run(core, second)
    timings = out.last("b").timings
    assert timings is not None and timings.cached_n == 256 and timings.prompt_n == 4
    uncached = run(EngineCore(runner, EngineConfig(prefix_cache=False)), second)
    assert out.tokens("b") == uncached.tokens("b")


def test_more_sequence_ids_than_a_batch_holds(small_f32_gguf: Path) -> None:
    """llama.cpp reserves an output row per sequence id at start and aborts when a batch may output fewer."""
    runner = LlamaRunner(small_f32_gguf, n_ctx=256, n_seq_max=64, n_batch=32, n_threads=2)
    try:
        batch = Batch()
        batch.add(63, 0, random_prompt(8, runner.info.n_vocab, seed=1), want_logits=True)
        assert runner.decode(batch).shape == (1, runner.info.n_vocab)
    finally:
        runner.close()


def test_more_sequences_than_the_kv_cache_holds(small_f32_gguf: Path) -> None:
    # flash attention off: with it, a token's result depends on what else its step computed, and on this random f32
    # model whose logits lie close together that changes a greedy token now and then (ServerSettings says so)
    small = LlamaRunner(small_f32_gguf, n_ctx=256, n_seq_max=16, n_batch=256, n_threads=2, flash_attn=False)
    try:
        # no prompt cap: it follows the steps' measured times, so the chunks (and, on this random f32 model whose
        # logits lie close together, a greedy token now and then) would change from run to run
        core = EngineCore(small, EngineConfig(max_running=8, step_tokens=256, itl_bound=None))
        prompts = [random_prompt(40, small.info.n_vocab, seed=100 + i) for i in range(8)]  # 8 x 80 cells > 256
        reqs = [GenerateRequest(f"k{i}", p, GREEDY, max_tokens=40, ignore_eos=True) for i, p in enumerate(prompts)]
        out = run(core, *reqs)
        alone = EngineCore(small, EngineConfig(max_running=1, step_tokens=256, prefix_cache=False))
        for req in reqs:
            assert len(out.tokens(req.request_id)) == 40
            assert out.tokens(req.request_id) == run(alone, req).tokens(req.request_id)
        assert core.stats().preemptions > 0  # it really ran out of cells, and recovered
    finally:
        small.close()


def test_cancel_ends_the_sequence_at_once_and_keeps_its_kv_as_a_prefix(runner: LlamaRunner) -> None:
    engine = Engine(runner, EngineConfig(max_running=4)).start()
    try:
        async def main() -> None:
            stream = engine.generate(GenerateRequest("c", "the quick brown fox", GREEDY, max_tokens=1000,
                                                     ignore_eos=True))
            async for _ in stream:
                if engine.stats().generated_tokens >= 5:
                    break
            await stream.aclose()
            for _ in range(100):
                if engine.stats().running == 0:
                    return
                await asyncio.sleep(0.01)

        asyncio.run(main())
        stats = engine.stats()
        assert stats.running == 0 and stats.cached_prefixes == 1 and stats.kv_cells_used > 0
    finally:
        engine.stop()


def test_a_request_sharing_512_tokens_with_a_cancelled_one_evaluates_only_its_suffix(runner: LlamaRunner) -> None:
    """TTFT by what the engine computes before the first token: only the 4-token suffix."""
    shared = random_prompt(512, runner.info.n_vocab, seed=7)
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512))
    out = run(core)
    core.add(core.prepare(GenerateRequest("first", [*shared, 400], GREEDY, max_tokens=100, ignore_eos=True), out))
    while not out.tokens("first"):  # a client that reads the first token and hangs up
        core.step()
    core.abort("first")
    second = GenerateRequest("second", [*shared, 500, 501, 502, 503], GREEDY, max_tokens=8, ignore_eos=True)
    got = run(core, second)
    timings = got.last("second").timings
    assert timings is not None and (timings.prompt_n, timings.cached_n) == (4, 512)
    uncached = run(EngineCore(runner, EngineConfig(prefix_cache=False)), second)
    assert got.tokens("second") == uncached.tokens("second")


def test_a_prefix_saved_to_host_memory_and_restored_gives_the_same_greedy_output(runner: LlamaRunner) -> None:
    """llama_state_seq_get_data / set_data round trip: the second turn of a chat whose first turn was evicted
    to host memory continues exactly as with no cache at all."""
    n_vocab = runner.info.n_vocab
    first = random_prompt(300, n_vocab, seed=8)
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512, host_cache_bytes=256 << 20))
    reply = run(core, GenerateRequest("t1", first, GREEDY, max_tokens=16, ignore_eos=True)).tokens("t1")
    core.prefix.clear()  # evicted: saved to host memory, gone from the KV cache
    assert core.kv.used_cells == 0 and core.stats().host_cache_entries == 1
    second = GenerateRequest("t2", [*first, *reply, 600, 601, 602], GREEDY, max_tokens=16, ignore_eos=True)
    restored = run(core, second)
    timings = restored.last("t2").timings
    assert timings is not None and timings.cached_n == 300 + 15  # all but the last reply token (never fed back)
    assert core.stats().restored_prompt_tokens == 315
    uncached = run(EngineCore(runner, EngineConfig(prefix_cache=False)), second)
    assert restored.tokens("t2") == uncached.tokens("t2")


def test_chats_restored_after_a_shared_system_prompt_give_the_same_greedy_output(runner: LlamaRunner) -> None:
    """Two chats behind one system prompt: each finished turn goes to host memory from the system prompt on (the
    runner saves part of a sequence through its scratch sequence), and the next turn writes it back after the
    system prompt the device keeps (forked, then the saved part restored onto it): exactly the uncached answer."""
    n_vocab = runner.info.n_vocab
    system = random_prompt(200, n_vocab, seed=11)
    chats = {c: [*system, *random_prompt(61, n_vocab, seed=12 + i)[1:]] for i, c in enumerate("ab")}
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512, prefix_floor_cells=0,
                                           host_cache_bytes=256 << 20))
    out = run(core, *(GenerateRequest(c, p, GREEDY, max_tokens=12, ignore_eos=True) for c, p in chats.items()))
    host = core.prefix.host
    assert host is not None and [e.base for e in host.entries] == [200, 200]
    assert core.kv.used_cells == 200  # the system prompt alone stays on the device
    turns = [GenerateRequest(f"{c}2", [*p, *out.tokens(c), 600, 601], GREEDY, max_tokens=12, ignore_eos=True)
             for c, p in chats.items()]
    again = run(core, *turns)
    for turn in turns:
        timings = again.last(turn.request_id).timings
        assert timings is not None and timings.cached_n == 260 + 11
        uncached = run(EngineCore(runner, EngineConfig(prefix_cache=False)), turn)
        assert again.tokens(turn.request_id) == uncached.tokens(turn.request_id)
    assert core.stats().restored_prompt_tokens == 2 * (60 + 11)


def test_restored_kv_is_bit_for_bit_the_saved_kv(runner: LlamaRunner) -> None:
    """Save a sequence, drop it, restore it, save it again: the same bytes (positions, sequence id, K and V)."""
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512))
    run(core, GenerateRequest("s", random_prompt(120, runner.info.n_vocab, seed=9), GREEDY, max_tokens=4,
                              ignore_eos=True))
    (slot,) = core.kv.slots.values()
    tokens, saved = list(slot.tokens), runner.save(slot.seq_id)
    core.kv.release(slot)
    again = core.kv.open()
    assert again.seq_id == slot.seq_id and core.kv.used_cells == 0
    assert core.kv.restore(again, tokens, saved)
    assert runner.save(again.seq_id) == saved and core.kv.used_cells == len(tokens) == 123
    core.kv.release(again)


def test_streamed_text_is_whole_utf8_and_matches_the_tokens(runner: LlamaRunner) -> None:
    core = EngineCore(runner, EngineConfig())
    params = SamplingParams(temperature=1.5, seed=3)  # hot sampling wanders into byte tokens
    out = run(core, GenerateRequest("u", "é中€ the quick brown fox", params, max_tokens=200, ignore_eos=True))
    tokens = out.tokens("u")
    expected = b"".join(runner.piece(t) for t in tokens).decode("utf-8", "replace")
    assert out.text("u") == expected
    assert out.last("u").finish_reason is FinishReason.LENGTH


def test_a_suffix_restored_onto_its_forked_base_is_bit_for_bit_the_saved_one(runner: LlamaRunner) -> None:
    """Save positions 100.. of a sequence, drop them, fork the first 100 into a new sequence and restore the saved
    part onto it: saving that sequence from 100 gives the same bytes; the scratch sequence is left empty."""
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=512))
    run(core, GenerateRequest("s", random_prompt(150, runner.info.n_vocab, seed=13), GREEDY, max_tokens=4,
                              ignore_eos=True))
    (slot,) = core.kv.slots.values()
    tokens, tail = list(slot.tokens), core.kv.save(slot, 100)
    core.kv.truncate(slot, 100)
    into = core.kv.open()
    core.kv.fork(slot, 100, into)
    assert core.kv.restore(into, tokens, tail, base=100)
    assert core.kv.save(into, 100) == tail and core.kv.used_cells == len(tokens) == 153
    assert llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(runner._ctx), runner.n_seq_max) == -1
    core.kv.release(into)
    core.kv.release(slot)
