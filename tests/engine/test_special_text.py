"""Control tokens a request names are written as their text (a tool-call marker), and only for that request."""

from __future__ import annotations

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.request import GenerateRequest, SamplingParams

from .conftest import run

MARKER = b"[TOOL_CALLS]"


def test_a_named_control_token_is_written_as_its_text() -> None:
    runner = FakeRunner(n_ctx=256)
    prompt = runner.tokenize("hello", add_bos=True, special=True)
    runner = FakeRunner(n_ctx=256, script={len(prompt): FakeRunner.BOS})  # BOS, a control token, comes first
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=64))
    greedy = SamplingParams(temperature=0.0)
    marked = GenerateRequest("marked", prompt, greedy, max_tokens=4, add_bos=False,
                             special_text={FakeRunner.BOS: MARKER})
    plain = GenerateRequest("plain", prompt, greedy, max_tokens=4, add_bos=False)
    out = run(core, marked, plain)
    assert out.text("marked").startswith(MARKER.decode())
    assert out.text("marked")[len(MARKER):] == out.text("plain")  # the same tokens; the marker only has text


def test_under_a_grammar_a_named_control_token_may_write_the_text_the_grammar_reads() -> None:
    """llama.cpp's grammar reads a control token as its text ("<s>"): with special_text the output writes that text
    too, so the token is allowed; without, it stays refused and the grammar's text is spelled in bytes."""
    runner = FakeRunner(n_ctx=256)
    prompt = runner.tokenize("hello", add_bos=True, special=True)
    runner = FakeRunner(n_ctx=256, script={len(prompt): FakeRunner.BOS})
    core = EngineCore(runner, EngineConfig(max_running=4, step_tokens=64))
    sampling = SamplingParams(temperature=0.0, grammar='root ::= "<s>" [a-z]')
    marked = GenerateRequest("marked", prompt, sampling, max_tokens=8, add_bos=False,
                             special_text={FakeRunner.BOS: b"<s>"})
    plain = GenerateRequest("plain", prompt, sampling, max_tokens=8, add_bos=False)
    out = run(core, marked, plain)
    assert out.tokens("marked")[0] == FakeRunner.BOS and out.text("marked").startswith("<s>")
    assert FakeRunner.BOS not in out.tokens("plain") and out.text("plain").startswith("<s>")
    assert len(out.text("marked")) == len(out.text("plain")) == 4
