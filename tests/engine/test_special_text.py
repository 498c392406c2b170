"""Control tokens a request names are written as their text (a tool-call marker), and only for that request."""

from __future__ import annotations

from pier.engine.core import EngineConfig, EngineCore
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
