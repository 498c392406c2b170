"""Grammars on the engine: llama.cpp's grammar sampler over the fake runner's real vocabulary. Every output is a
sentence of the grammar (greedy too: the numpy fast path must not skip it), a bad grammar is refused before any
work with llama.cpp's reason, and a continuation replays through the grammar."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from pier.engine import grammar as grammars
from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.grammar import InvalidGrammar, check_grammar
from pier.engine.json_schema import schema_to_gbnf
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.sampling import TokenSampler
from pier.engine.validate import check_request
from pier.errors import InvalidRequest

from .conftest import run

# Sentences: "yes", "no", or a list like "[12, 7]" of at most three numbers of 1-3 digits.
LIST_GRAMMAR = r'''root ::= ("yes" | "no" | list)
list ::= "[" (num ("," " " num ("," " " num)?)?)? "]"
num ::= [1-9] [0-9]? [0-9]?'''
SENTENCE = re.compile(r"yes|no|\[(?:[1-9][0-9]{0,2}(?:, [1-9][0-9]{0,2}(?:, [1-9][0-9]{0,2})?)?)?\]")


def core() -> EngineCore:
    return EngineCore(FakeRunner(n_ctx=512, n_seq_max=16, n_batch=64), EngineConfig(max_running=4, step_tokens=64))


@pytest.mark.parametrize("sampling", [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=1.5, top_k=20, top_p=0.9, repetition_penalty=1.3),
    SamplingParams(temperature=0.0, logit_bias={3 + ord("y"): 50.0}),
], ids=["greedy", "sampled", "truncated-penalties", "greedy-biased"])
def test_every_output_is_a_sentence_of_the_grammar(sampling: SamplingParams) -> None:
    requests = [GenerateRequest(f"r{i}", f"hello {'world ' * i}", replace(sampling, grammar=LIST_GRAMMAR, seed=i),
                                max_tokens=40) for i in range(12)]
    out = run(core(), *requests)
    for request in requests:
        assert SENTENCE.fullmatch(out.text(request.request_id)), out.text(request.request_id)
        last = out.last(request.request_id)
        assert last.finish_reason is FinishReason.STOP and last.stop_reason == FakeRunner.EOS


def test_greedy_checks_its_choice_first_and_picks_what_the_whole_grammar_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = [GenerateRequest(f"r{i}", f"hello {'world ' * i}", SamplingParams(temperature=0.0, grammar=g,
                                repetition_penalty=1.2), max_tokens=40)
                for i, g in enumerate([LIST_GRAMMAR, schema_to_gbnf({"type": "array", "maxItems": 4})])]
    quick = run(core(), *requests)
    monkeypatch.setattr(grammars, "allows", lambda grammar, token: False)  # always the whole-vocabulary path
    whole = run(core(), *requests)
    for request in requests:
        assert quick.tokens(request.request_id) == whole.tokens(request.request_id)


def test_without_a_grammar_the_same_requests_write_anything() -> None:
    requests = [GenerateRequest(f"r{i}", "hello", SamplingParams(temperature=1.0, seed=i), max_tokens=10)
                for i in range(4)]
    out = run(core(), *requests)
    assert not any(SENTENCE.fullmatch(out.text(r.request_id)) for r in requests)


def test_a_finished_grammar_that_min_tokens_keeps_from_ending_stops() -> None:
    request = GenerateRequest("r", "hello", SamplingParams(temperature=0.0, grammar='root ::= "ok"'),
                              max_tokens=20, min_tokens=10)
    out = run(core(), request)
    assert out.text("r") == "ok"
    assert out.last("r").finish_reason is FinishReason.STOP


@pytest.mark.parametrize(("grammar", "reason"), [
    ('root ::= "a" [b-', "unexpected end of input"),
    ('start ::= "a"', "grammar does not contain a 'root' symbol"),
    ('root ::= thing', "Undefined rule identifier 'thing'"),
    ('root ::= root "a" | "b"', "left recursion"),
    ("   ", "The grammar is empty"),
    ('root ::= ' + '("a" ' * 20000 + ')? ' * 20000, "nests groups 20000 deep"),  # llama.cpp's parser would crash
])
def test_a_bad_grammar_is_refused_with_llama_cpp_s_reason(grammar: str, reason: str) -> None:
    with pytest.raises(InvalidGrammar, match=re.escape(reason)) as caught:
        check_grammar(FakeRunner().vocab, grammar)
    assert caught.value.param == "grammar"


def test_a_request_with_a_bad_grammar_is_refused_before_any_work() -> None:
    engine, runner = core(), FakeRunner()
    request = GenerateRequest("r", "hello", SamplingParams(grammar="root ::= ("), max_tokens=5)
    with pytest.raises(InvalidRequest, match="does not compile"):
        check_request(request, runner)
    with pytest.raises(InvalidRequest):
        engine.prepare(request, lambda chunk: None)
    assert not engine.has_work and runner.decode_calls == 0


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=0.0), SamplingParams(temperature=1.2, seed=7)],
                         ids=["greedy", "seeded"])
@pytest.mark.parametrize("cut", [1, 3, 6])
def test_a_continuation_replays_through_the_grammar(sampling: SamplingParams, cut: int) -> None:
    request = GenerateRequest("r", "hello world", replace(sampling, grammar=LIST_GRAMMAR), max_tokens=40)
    out = run(core(), request)
    tokens, text = out.tokens("r"), out.text("r")
    cut = min(cut, len(tokens) - 2)
    resumed = run(core(), replace(request, continuation=tokens[:cut]))
    assert resumed.tokens("r") == tokens
    assert resumed.text("r") == text


def test_a_continuation_the_grammar_could_not_have_produced_is_refused() -> None:
    runner = FakeRunner()
    not_a_sentence = runner.tokenize("maybe", add_bos=False, special=False)
    request = GenerateRequest("r", "hello", SamplingParams(temperature=0.0, grammar=LIST_GRAMMAR), max_tokens=20,
                              continuation=not_a_sentence)
    with pytest.raises(InvalidRequest, match="does not follow the request's grammar"):
        core().prepare(request, lambda chunk: None)


@pytest.mark.parametrize("sampling", [SamplingParams(temperature=1.0), SamplingParams(temperature=0.7, top_k=3)],
                         ids=["tried-first", "truncated-masked-first"])
def test_sampling_under_a_grammar_follows_the_masked_distribution(sampling: SamplingParams) -> None:
    """Drawn 3000 times from one row, each allowed token comes out as often as softmax(row masked to the
    grammar) says (the tried-first path keeps an allowed draw, else draws from the masked row)."""
    fake = FakeRunner()
    allowed = [FakeRunner.FIRST_BYTE + ord(c) for c in "abcd"]
    row = np.full(fake.info.n_vocab, -2.0, dtype=np.float32)
    row[allowed] = [1.0, 0.5, 0.0, -1.0]
    row[FakeRunner.FIRST_BYTE + ord("z")] = 3.0  # the likeliest token is not allowed
    counts = {t: 0 for t in allowed}
    for seed in range(3000):
        sampler = TokenSampler(replace(sampling, grammar="root ::= [a-d]", seed=seed), fake.info.n_vocab, 512,
                               fake.vocab)
        counts[sampler.sample(row)] += 1
        sampler.close()
    masked = row[allowed] / sampling.temperature
    if sampling.top_k:
        masked[3] = -np.inf  # the three best allowed
    expected = np.exp(masked - masked.max()) / np.exp(masked - masked.max()).sum()
    observed = np.array([counts[t] for t in allowed]) / 3000
    assert np.abs(observed - expected).max() < 0.03, (observed, expected)
