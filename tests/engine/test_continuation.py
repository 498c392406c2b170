"""Continuing a request on a fresh engine from the tokens another one generated: the rest of the output is what
the first engine would have produced (greedy and seeded sampling), text already sent is not sent again, and
the held-back text (split UTF-8, a possible stop string) carries over."""

from __future__ import annotations

import ctypes
from dataclasses import replace

import llama_cpp
import numpy as np
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.errors import InvalidRequest

from .conftest import run

GREEDY = SamplingParams(temperature=0.0)


def fresh_core() -> EngineCore:
    return EngineCore(FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64), EngineConfig(max_running=4, step_tokens=64))


def prompt(n: int, seed: int = 0) -> list[int]:
    return [1] + [3 + (seed * 31 + i * 7) % 250 for i in range(n - 1)]


def whole(request: GenerateRequest) -> tuple[list[int], str, FinishReason | None]:
    out = run(fresh_core(), request)
    return out.tokens(request.request_id), out.text(request.request_id), out.last(request.request_id).finish_reason


@pytest.mark.parametrize("sampling", [
    GREEDY,
    SamplingParams(temperature=0.0, repetition_penalty=1.3, frequency_penalty=0.5),
    SamplingParams(temperature=1.5, seed=1234),
    SamplingParams(temperature=0.9, top_k=40, top_p=0.6, min_p=0.05, presence_penalty=0.4, seed=99),
], ids=["greedy", "greedy-penalties", "seeded", "seeded-truncated-penalties"])
@pytest.mark.parametrize("cut", [1, 7, 23])
def test_a_continuation_produces_the_rest_of_the_same_output(sampling: SamplingParams, cut: int) -> None:
    request = GenerateRequest("r", prompt(12), sampling, max_tokens=40, ignore_eos=True)
    tokens, text, reason = whole(request)
    assert len(tokens) == 40

    resumed = run(fresh_core(), replace(request, continuation=tokens[:cut]))
    chunks = resumed.chunks["r"]
    first, rest = chunks[0], chunks[1:]
    assert first.replayed and first.token_ids == tuple(tokens[:cut])
    assert not any(c.replayed for c in rest)
    assert [t for c in rest for t in c.token_ids] == tokens[cut:]
    assert first.text + "".join(c.text for c in rest) == text
    assert rest[-1].finish_reason is reason
    assert rest[-1].timings is not None and rest[-1].timings.predicted_n == 40  # the continuation counts once


def test_the_dist_sampler_draws_the_same_whatever_the_candidates() -> None:
    """What TokenSampler.replay relies on: one call of llama.cpp's dist sampler advances its RNG the same
    whether it sees one candidate, two or the whole vocabulary. If llama.cpp changes this, seeded
    continuations need the real candidate counts."""
    kinds = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")], align=False)

    def draws_after(sizes: list[int]) -> list[int]:
        dist = llama_cpp.llama_sampler_init_dist(42)
        picks = []
        try:
            for size in [*sizes, *[500] * 20]:
                cells = np.zeros(size, dtype=kinds)
                cells["id"] = np.arange(size)
                array = llama_cpp.llama_token_data_array(
                    data=cells.ctypes.data_as(llama_cpp.llama_token_data_p), size=size, selected=-1, sorted=False)
                llama_cpp.llama_sampler_apply(dist, ctypes.byref(array))
                picks.append(int(cells["id"][array.selected]))
        finally:
            llama_cpp.llama_sampler_free(dist)
        return picks[len(sizes):]

    assert draws_after([1, 2, 500]) == draws_after([2, 2, 2]) == draws_after([7, 1, 1])
    assert draws_after([2]) != draws_after([])


def test_text_held_back_for_a_stop_string_or_a_split_character_carries_over() -> None:
    # FakeRunner's vocabulary: 3 + byte value for single bytes, so "é" (c3 a9) is two tokens.
    runner = FakeRunner()
    e_acute = [3 + b for b in "é".encode()]
    script = {13: e_acute[0], 14: e_acute[1], 15: 3 + ord("S"), 16: 3 + ord("T"), 17: 3 + ord("O"), 18: 3 + ord("P")}
    scripted = EngineCore(FakeRunner(script=script), EngineConfig())
    request = GenerateRequest("r", prompt(12), GREEDY, max_tokens=30, ignore_eos=True, stop=["STOP"])
    whole_run = run(scripted, request)
    assert whole_run.last("r").stop_reason == "STOP"
    tokens, text = whole_run.tokens("r"), whole_run.text("r")
    assert runner.piece(tokens[1]) == b"\xc3" and text.endswith("é")

    for cut in (2, 4, 5):  # inside "é"; "S" held back; "ST" held back
        core = EngineCore(FakeRunner(script=script), EngineConfig())
        resumed = run(core, replace(request, continuation=tokens[:cut]))
        replayed, rest = resumed.chunks["r"][0], resumed.chunks["r"][1:]
        assert replayed.replayed
        assert replayed.text + "".join(c.text for c in rest) == text
        assert resumed.last("r").stop_reason == "STOP"


def test_a_continuation_that_would_have_ended_the_request_is_refused() -> None:
    core = fresh_core()
    request = GenerateRequest("r", prompt(12), GREEDY, max_tokens=5)
    with pytest.raises(InvalidRequest, match="nothing to generate"):
        core.prepare(replace(request, continuation=[40] * 5), lambda chunk: None)
    with pytest.raises(InvalidRequest, match="would have ended"):
        core.prepare(replace(request, continuation=[40, FakeRunner.EOS]), lambda chunk: None)
    with pytest.raises(InvalidRequest, match="outside the vocabulary"):
        core.prepare(replace(request, continuation=[10**6]), lambda chunk: None)


def test_min_tokens_counts_the_continuation() -> None:
    script = {14: FakeRunner.EOS, 16: FakeRunner.EOS}  # EOS is the argmax after 2 and 4 generated tokens
    request = GenerateRequest("r", prompt(12), GREEDY, max_tokens=10, min_tokens=3)
    whole_run = run(EngineCore(FakeRunner(script=script), EngineConfig()), request)
    tokens = whole_run.tokens("r")
    assert len(tokens) == 5 and tokens[-1] == FakeRunner.EOS  # the first EOS came before min_tokens
    for cut in (2, 3):
        core = EngineCore(FakeRunner(script=script), EngineConfig())
        assert run(core, replace(request, continuation=tokens[:cut])).tokens("r") == tokens
