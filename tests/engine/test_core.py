"""The engine step over the fake runner: batching, prefix cache, KV pressure, stops, cancellation."""

from __future__ import annotations

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.step_times import StepKind
from pier.errors import ContextLengthExceeded, InvalidRequest

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)


def greedy(rid: str, prompt: list[int] | str, n: int = 8, **kw: object) -> GenerateRequest:
    return GenerateRequest(rid, prompt, GREEDY, max_tokens=n, ignore_eos=True, **kw)  # type: ignore[arg-type]


def prompt(n: int, seed: int = 0) -> list[int]:
    return [1] + [3 + (seed * 31 + i * 7) % 250 for i in range(n - 1)]


def alone(req: GenerateRequest, **config: object) -> list[int]:
    core = EngineCore(FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64), EngineConfig(**config))  # type: ignore[arg-type]
    return run(core, req).tokens(req.request_id)


def test_concurrent_requests_match_one_at_a_time(core: EngineCore) -> None:
    reqs = [greedy(f"r{i}", prompt(5 + 17 * i, seed=i), n=6 + i) for i in range(8)]
    out = run(core, *reqs)
    for req in reqs:
        assert out.tokens(req.request_id) == alone(req, prefix_cache=False)
        assert out.last(req.request_id).finish_reason is FinishReason.LENGTH


def test_prefill_is_chunked_and_running_sequences_keep_decoding(fake: FakeRunner) -> None:
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=16))
    collector = run(core, greedy("short", prompt(4), n=30))
    assert len(collector.tokens("short")) == 30
    long_req = greedy("long", prompt(100), n=2)
    short_req = greedy("short2", prompt(4, seed=3), n=30)
    core.add(core.prepare(short_req, collector))
    core.step()  # short prefills and gets its first token
    core.add(core.prepare(long_req, collector))
    generated_before = len(collector.tokens("short2"))
    for _ in range(5):  # the 100-token prompt needs several 16-token steps ...
        core.step()
    # ... and the running sequence got a token in every one of them
    assert len(collector.tokens("short2")) == generated_before + 5
    assert not collector.chunks["long"]


def test_a_short_prompt_behind_a_long_one_is_not_kept_waiting(fake: FakeRunner) -> None:
    """The oldest prompt takes half of each step's budget, the shortest the rest (scheduler.plan): a short prompt
    that arrives while a long one is being computed gets its first token in its first step."""
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=64))
    collector = run(core)
    core.add(core.prepare(greedy("long", prompt(400), n=2), collector))
    core.step()
    core.add(core.prepare(greedy("short", prompt(20, seed=5), n=2), collector))
    core.step()
    assert collector.tokens("short") and not collector.chunks["long"]
    while core.has_work:
        core.step()
    assert collector.tokens("long") == alone(greedy("long", prompt(400), n=2))


def test_prefix_cache_evaluates_only_the_suffix(fake: FakeRunner, core: EngineCore) -> None:
    shared = prompt(200)
    first = greedy("a", [*shared, 40, 41], n=4)
    run(core, first)
    before = fake.decoded_tokens
    second = greedy("b", [*shared, 50, 51, 52], n=4)
    out = run(core, second)
    timings = out.last("b").timings
    assert timings is not None and timings.cached_n == 200
    assert fake.decoded_tokens - before == 3 + 3  # the 3-token suffix, then 3 decodes
    assert out.tokens("b") == alone(second, prefix_cache=False)
    assert core.stats().prefix_hit_rate == pytest.approx(200 / (202 + 203))


def test_waiting_prompt_waits_for_a_prefix_being_computed(fake: FakeRunner) -> None:
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=32))
    shared = prompt(100)
    reqs = [greedy(f"r{i}", [*shared, 60 + i], n=3) for i in range(4)]
    out = run(core, *reqs)
    # the shared 100 tokens are evaluated once, not four times
    assert fake.decoded_tokens == 101 + 3 * 1 + 4 * 2
    for req in reqs:
        assert out.tokens(req.request_id) == alone(req, prefix_cache=False)


@pytest.mark.parametrize(("shared", "prefix_cache", "waits"),
                         # the first prompt has computed 8 tokens when the second comes: those it forks at once
                         [(100, True, True), (20, True, True), (16, True, True), (15, True, False), (3, True, False),
                          (1, True, False), (100, False, False)])
def test_a_prompt_waits_for_a_prefix_in_flight_only_when_the_cache_can_serve_it(
        fake: FakeRunner, shared: int, prefix_cache: bool, waits: bool) -> None:
    """Random prompts share a BOS and templates their first few tokens: those are not worth queueing for (every
    new prompt would wait for every other one to finish its prompt), nor is anything with the cache off."""
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=8, prefix_cache=prefix_cache))
    collector = run(core)
    start = prompt(shared)
    core.add(core.prepare(greedy("first", [*start, *prompt(80, seed=1)[1:]], n=2), collector))
    core.step()  # 8 of its 80+ tokens: still computing its prompt
    core.add(core.prepare(greedy("second", [*start, *prompt(40, seed=2)[1:]], n=2), collector))
    core.step()
    assert (core.stats().running == 1) is waits


def test_kv_exhaustion_waits_and_preempts_without_corruption() -> None:
    fake = FakeRunner(n_ctx=128, n_seq_max=16, n_batch=64)
    core = EngineCore(fake, EngineConfig(max_running=8, step_tokens=64))
    reqs = [greedy(f"r{i}", prompt(30, seed=i), n=40) for i in range(8)]  # 8 x 70 cells, 128 exist
    out = run(core, *reqs)
    for req in reqs:
        assert out.tokens(req.request_id) == alone(req, prefix_cache=False)
    assert fake.used_cells <= 128


def test_abort_ends_the_sequence_at_once_and_keeps_its_kv_as_an_idle_prefix(
    fake: FakeRunner, core: EngineCore
) -> None:
    out = run(core)
    core.add(core.prepare(greedy("x", prompt(50), n=100), out))
    core.step()
    core.step()
    assert fake.used_cells > 0
    assert core.abort("x")
    assert fake.used_cells == 51 and core.stats().cached_prefixes == 1  # the prompt and one token fed back
    core.prefix.clear()  # idle, so evictable like any finished prompt
    assert fake.used_cells == 0
    assert out.last("x").finish_reason is FinishReason.ABORT
    assert not core.has_work and not core.abort("x")


def test_abort_of_a_waiting_request(fake: FakeRunner) -> None:
    core = EngineCore(fake, EngineConfig(max_running=1, step_tokens=64))
    out = run(core)
    for rid in ("a", "b"):
        core.add(core.prepare(greedy(rid, prompt(5), n=50), out))
    core.step()
    core.abort("b")
    assert out.last("b").finish_reason is FinishReason.ABORT
    assert out.last("b").token_ids == ()


def test_eos_stops_unless_ignored() -> None:
    runner = FakeRunner(eos_every=12)
    core = EngineCore(runner)
    out = run(core, GenerateRequest("e", prompt(5), GREEDY, max_tokens=50))
    last = out.last("e")
    assert last.finish_reason is FinishReason.STOP and last.stop_reason == FakeRunner.EOS
    assert len(out.tokens("e")) == 12 - 5 + 1
    out = run(core, GenerateRequest("i", prompt(5), GREEDY, max_tokens=20, ignore_eos=True))
    assert out.last("i").finish_reason is FinishReason.LENGTH and len(out.tokens("i")) == 20


def test_min_tokens_suppresses_eos() -> None:
    core = EngineCore(FakeRunner(eos_every=8))
    out = run(core, GenerateRequest("m", prompt(5), GREEDY, max_tokens=20, min_tokens=10))
    assert FakeRunner.EOS not in out.tokens("m")[:10]


def test_stop_string_is_never_emitted(core: EngineCore) -> None:
    free = run(core, greedy("free", "hello world", n=30)).text("free")
    stop = free[len(free) // 2 : len(free) // 2 + 3]
    out = run(core, greedy("s", "hello world", n=30, stop=[stop]))
    assert out.text("s") == free[: free.index(stop)]
    assert out.last("s").stop_reason == stop and out.last("s").finish_reason is FinishReason.STOP


def test_stop_token_ids(core: EngineCore) -> None:
    free = run(core, greedy("free", prompt(7), n=10)).tokens("free")
    out = run(core, greedy("t", prompt(7), n=10, stop_token_ids=[free[4]]))
    assert out.tokens("t") == free[: free.index(free[4]) + 1]
    assert out.last("t").stop_reason == free[4]


def test_seeded_sampling_is_reproducible(core: EngineCore) -> None:
    def sampled(rid: str, seed: int) -> list[int]:
        params = SamplingParams(temperature=0.9, top_k=50, top_p=0.95, min_p=0.01, seed=seed,
                                repetition_penalty=1.1, presence_penalty=0.2, frequency_penalty=0.1)
        return run(core, GenerateRequest(rid, prompt(9), params, max_tokens=16, ignore_eos=True)).tokens(rid)

    assert sampled("a", 1) == sampled("b", 1)
    assert sampled("c", 1) != sampled("d", 2)


def test_logit_bias_forces_a_token(core: EngineCore) -> None:
    params = SamplingParams(temperature=0.0, logit_bias={FakeRunner.FIRST_BYTE + ord("z"): 100.0})
    out = run(core, GenerateRequest("b", prompt(5), params, max_tokens=5, ignore_eos=True))
    assert out.text("b") == "zzzzz"


def test_timings(core: EngineCore) -> None:
    out = run(core, greedy("t", prompt(20), n=5))
    t = out.last("t").timings
    assert t is not None
    assert (t.prompt_n, t.cached_n, t.predicted_n) == (20, 0, 5)
    assert t.ttft_ms >= t.queue_ms >= 0 and t.prompt_ms >= 0 and t.predicted_ms >= 0


@pytest.mark.parametrize(
    ("request_", "error", "words"),
    [
        (GenerateRequest("x", ""), InvalidRequest, "empty"),
        (GenerateRequest("x", []), InvalidRequest, "empty"),
        (GenerateRequest("x", [1, 99999]), InvalidRequest, "99999"),
        (GenerateRequest("x", [1] * 600), ContextLengthExceeded, "512"),
        (GenerateRequest("x", [1] * 500, max_tokens=20), ContextLengthExceeded, "max_tokens <= 12"),
        (GenerateRequest("x", [1, 5], max_tokens=0), InvalidRequest, "max_tokens"),
        (GenerateRequest("x", [1, 5], SamplingParams(temperature=-1)), InvalidRequest, "temperature"),
        (GenerateRequest("x", [1, 5], SamplingParams(top_p=2)), InvalidRequest, "top_p"),
        (GenerateRequest("x", [1, 5], max_tokens=4, min_tokens=5), InvalidRequest, "min_tokens"),
    ],
)
def test_bad_input_is_refused_before_any_work(
    core: EngineCore, fake: FakeRunner, request_: GenerateRequest, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        core.prepare(request_, lambda chunk: None)
    assert fake.decode_calls == 0 and not core.has_work


def test_a_character_split_over_byte_tokens_is_emitted_whole() -> None:
    byte = FakeRunner.FIRST_BYTE
    script = {3: byte + 0xE4, 4: byte + 0xB8, 5: byte + 0xAD, 6: byte + ord("!")}  # "中!" as four byte tokens
    core = EngineCore(FakeRunner(script=script))
    out = run(core, greedy("u", [1, 5, 6], n=4))
    assert [c.text for c in out.chunks["u"]] == ["", "", "中", "!"]
    assert [len(c.token_ids) for c in out.chunks["u"]] == [1, 1, 1, 1]


def test_min_tokens_holds_back_stop_tokens_and_strings(core: EngineCore) -> None:
    free = run(core, greedy("free", "hello world", n=12))
    first, text = free.tokens("free")[0], free.text("free")
    by_id = run(core, greedy("i", "hello world", n=12, stop_token_ids=[first], min_tokens=3))
    assert first not in by_id.tokens("i")[:3] and len(by_id.tokens("i")) > 3
    by_text = run(core, greedy("s", "hello world", n=12, stop=[text[:2]], min_tokens=3))
    assert len(by_text.tokens("s")) > 3


def test_a_step_without_prompt_tokens_measures_decoding_at_rows_not_seen_yet(fake: FakeRunner) -> None:
    """Decode-only steps were seen at 1 row only; with 7 streams and a new prompt, the engine first runs one step
    without the prompt (a probe of what 7 rows cost alone), then caps the prompt by what it measured."""
    core = EngineCore(fake, EngineConfig(max_running=10, step_tokens=64, prefix_cache=False))  # slots to spare
    steps: list[tuple[int, int]] = []
    observe = core.step_cost.observe

    def recording(decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        steps.append((decode_rows, prompt_tokens))
        observe(decode_rows, prompt_tokens, seconds)

    core.step_cost.observe = recording  # type: ignore[method-assign]
    collector = run(core)
    core.add(core.prepare(greedy("s0", prompt(4), n=200), collector))
    for _ in range(3):
        core.step()
    assert steps[-1] == (1, 0)
    for i in range(1, 7):
        core.add(core.prepare(greedy(f"s{i}", prompt(4, seed=i), n=200), collector))
    core.step()  # six 4-token prompts beside one stream: within the first cap (32 tokens)
    assert steps[-1] == (1, 24)
    core.add(core.prepare(greedy("late", prompt(40, seed=9), n=4), collector))
    core.step()
    core.step()
    assert steps[-2:][0] == (7, 0)  # the probe
    assert steps[-1][0] == 7 and steps[-1][1] > 0  # then the prompt, beside the same streams


def test_each_step_is_timed_by_what_it_carried(fake: FakeRunner) -> None:
    """A prompt step alone, then steps with the stream beside the next prompt's chunks, then the streams alone."""
    core = EngineCore(fake, EngineConfig(max_running=4, step_tokens=16, itl_bound=None))
    collector = run(core)
    core.add(core.prepare(greedy("first", prompt(10), n=6), collector))
    core.step()
    core.add(core.prepare(greedy("second", prompt(40, seed=2), n=6), collector))
    while core.has_work:
        core.step()
    forward, whole = core.stats().step_times.forward, core.stats().step_times.step
    assert forward[StepKind.PROMPT].count == 1  # the first prompt, nothing running yet
    assert forward[StepKind.MIXED].count == 3  # 40 prompt tokens beside one stream, 15 a step
    assert forward[StepKind.DECODE].count > 0
    assert sum(h.count for h in forward.values()) == core.stats().steps
    for kind in StepKind:  # the whole step holds its forward pass
        assert whole[kind].count == forward[kind].count and whole[kind].total_s >= forward[kind].total_s
