"""A lazy grammar (SamplingParams.grammar_triggers): free text until the output matches a trigger, then every token
keeps the text from the trigger's group on a sentence of the grammar."""

from __future__ import annotations

import re

import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import run

GRAMMAR = 'root ::= "<" [x-z] [x-z] ">"'
TRIGGER = r"[\s\S]*?(<[\s\S]*)"


def scripted_core(text: str) -> tuple[EngineCore, list[int]]:
    """The fake model made to write `text` first (byte by byte), then what its random logits give."""
    prompt = FakeRunner(n_ctx=512).tokenize("hello", add_bos=True, special=True)
    script = {len(prompt) + i: FakeRunner.FIRST_BYTE + b for i, b in enumerate(text.encode())}
    return EngineCore(FakeRunner(n_ctx=512, script=script), EngineConfig(max_running=4, step_tokens=64)), prompt


@pytest.mark.parametrize("seed", range(4))
def test_text_before_the_trigger_is_free_and_after_it_follows_the_grammar(seed: int) -> None:
    core, prompt = scripted_core("ab <")
    sampling = SamplingParams(temperature=1.0, seed=seed, grammar=GRAMMAR, grammar_triggers=(TRIGGER,))
    lazy = GenerateRequest("lazy", prompt, sampling, max_tokens=12, add_bos=False)
    eager = GenerateRequest("eager", prompt, SamplingParams(temperature=1.0, seed=seed, grammar=GRAMMAR),
                            max_tokens=12, add_bos=False)
    out = run(core, lazy, eager)
    assert re.fullmatch(r"ab <[x-z]{2}>", out.text("lazy")), out.text("lazy")
    assert out.last("lazy").finish_reason is FinishReason.STOP
    assert re.fullmatch(r"<[x-z]{2}>", out.text("eager"))  # the same grammar, not lazy: from the first token


def test_without_the_trigger_the_output_is_never_constrained() -> None:
    core, prompt = scripted_core("abc def")
    sampling = SamplingParams(temperature=0.0, grammar=GRAMMAR, grammar_triggers=(r"[\s\S]*?(@@[\s\S]*)",))
    lazy = GenerateRequest("lazy", prompt, sampling, max_tokens=7, add_bos=False)
    free = GenerateRequest("free", prompt, SamplingParams(temperature=0.0), max_tokens=7, add_bos=False)
    out = run(core, lazy, free)
    assert out.text("lazy") == out.text("free") == "abc def"
