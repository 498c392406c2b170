"""The stream gives, piece by piece, what the parser gives for the whole answer, and never sends the start of a
call as content."""

from __future__ import annotations

import pytest

from pier.model.tools.families import Family
from pier.model.tools.parsers import PARSERS
from pier.model.tools.stream import CallArguments, CallStart, Event, ToolCallStream

KNOWN = {"get_weather", "get_time"}

ANSWERS: list[tuple[Family, str]] = [
    (Family.HERMES, 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "n": [1, {"a": '
     '"}"}]}}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'),
    (Family.HERMES, "A plain answer, with < and <tool and {braces}."),
    (Family.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa'),  # cut off by max_tokens
    (Family.HERMES, '<tool_call>\n{"name": "unknown", "arguments": {}}\n</tool_call>'),  # not a tool: content
    (Family.HERMES, "text ending in a partial marker <tool_ca"),
    (Family.LLAMA3, '  {"name": "get_weather", "parameters": {"city": "Paris"}}'),
    (Family.LLAMA3, '{"answer": 42}'),
    (Family.MISTRAL, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", '
     '"arguments": {}}]'),
    (Family.LLAMA3, '{"name": "get_time", "parameters": "{}"}'),
    (Family.FUNCTIONARY, 'Sure <function=get_weather>{"city": "Paris"}</function><function=get_time>{}</function>'),
    (Family.FUNCTIONARY, '<function=get_wea'),  # arguments as a string: sent whole at the end
]


def _run(family: Family, pieces: list[str]) -> tuple[list[Event], list[Event]]:
    stream = ToolCallStream(family, KNOWN.__contains__)
    events: list[Event] = []
    for piece in pieces:
        events += stream.push(piece)
    tail, _ = stream.finish()
    return events, tail


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
@pytest.mark.parametrize(("family", "answer"), ANSWERS)
def test_stream_matches_the_whole_answer(family: Family, answer: str, size: int) -> None:
    events, tail = _run(family, [answer[i:i + size] for i in range(0, len(answer), size)])
    everything = events + tail
    content = "".join(e for e in everything if isinstance(e, str))
    names = [e.name for e in everything if isinstance(e, CallStart)]
    arguments = ["".join(e.fragment for e in everything if isinstance(e, CallArguments) and e.index == i)
                 for i in range(len(names))]
    parsed = PARSERS[family](answer)
    if parsed.calls and all(c.name in KNOWN for c in parsed.calls):
        assert (content if content.strip() else None) == parsed.content
        assert names == [c.name for c in parsed.calls]
        assert arguments == [c.arguments for c in parsed.calls]
    elif names:  # announced before it was cut off: the stream keeps what it sent, and no content repeats it
        assert answer.startswith(content)
        assert "<tool_call>" not in content
    else:
        assert content == answer


def test_a_call_is_announced_before_its_arguments_and_they_stream_as_they_come() -> None:
    stream = ToolCallStream(Family.HERMES, KNOWN.__contains__)
    assert stream.push("Sure. <tool") == ["Sure. "]  # the start of the marker is held back
    assert stream.push('_call>\n{"name": "get_wea') == []
    assert stream.push('ther", "arguments": {"ci') == [CallStart(0, "get_weather"), CallArguments(0, '{"ci')]
    assert stream.push('ty": "Paris"}}\n</tool_call>') == [CallArguments(0, 'ty": "Paris"}')]
    tail, parsed = stream.finish()
    assert tail == []
    assert [c.name for c in parsed.calls] == ["get_weather"]


def test_held_text_that_was_not_a_call_goes_out_at_the_end() -> None:
    stream = ToolCallStream(Family.HERMES, KNOWN.__contains__)
    assert stream.push("a <tool_ca") == ["a "]
    assert stream.finish()[0] == ["<tool_ca"]


def test_with_parallel_calls_off_only_the_first_call_is_read() -> None:
    answer = ANSWERS[0][1]  # content, then two calls
    stream = ToolCallStream(Family.HERMES, KNOWN.__contains__, max_calls=1)
    events = [e for i in range(0, len(answer), 3) for e in stream.push(answer[i:i + 3])]
    tail, parsed = stream.finish()
    assert [e.name for e in events + tail if isinstance(e, CallStart)] == ["get_weather"]
    assert [c.name for c in parsed.calls] == ["get_weather"]
