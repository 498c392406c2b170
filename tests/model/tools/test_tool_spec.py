"""Tools and tool_choice as requests send them: what is accepted, and the 400 for what is not."""

from __future__ import annotations

from typing import Any

import pytest

from pier.errors import InvalidRequest
from pier.model.tools.tool_spec import Mode, ToolChoice, tool_set

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time"}}

ACCEPTED: list[tuple[list[Any] | None, Any, ToolChoice, tuple[str, ...]]] = [
    ([WEATHER, TIME], None, ToolChoice(Mode.AUTO), ("get_weather", "get_time")),
    ([WEATHER, TIME], "auto", ToolChoice(Mode.AUTO), ("get_weather", "get_time")),
    ([WEATHER, TIME], "none", ToolChoice(Mode.NONE), ()),
    ([WEATHER, TIME], "required", ToolChoice(Mode.REQUIRED), ("get_weather", "get_time")),
    ([WEATHER, TIME], {"type": "function", "function": {"name": "get_time"}},
     ToolChoice(Mode.REQUIRED, "get_time", parallel=False), ("get_time",)),
    (None, "auto", ToolChoice(Mode.AUTO), ()),
    (None, "none", ToolChoice(Mode.NONE), ()),
]


@pytest.mark.parametrize(("tools", "choice", "expected", "callable_names"), ACCEPTED)
def test_accepted(tools: list[Any] | None, choice: Any, expected: ToolChoice, callable_names: tuple[str, ...]) -> None:
    parsed = tool_set(tools, choice)
    assert parsed.choice == expected
    assert tuple(t.name for t in parsed.callable if parsed.active) == callable_names


def _bad_schema(schema: Any) -> list[Any]:
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


REFUSED: list[tuple[list[Any] | None, Any, str, str]] = [
    ([WEATHER], {"type": "function", "function": {"name": "get_time"}}, "tool_choice", "not in tools"),
    ([WEATHER], "sometimes", "tool_choice", "must be"),
    ([WEATHER], {"type": "function"}, "tool_choice", "must be"),
    (None, "required", "tool_choice", "requires tools"),
    ([WEATHER, WEATHER], None, "tools", "Two tools"),
    ([{"type": "retrieval"}], None, "tools[0]", "only function tools"),
    ([{"type": "function", "function": {"name": "has space"}}], None, "tools[0].function.name", "letters"),
    ([{"type": "function"}], None, "tools[0].function", "must be an object"),
    (_bad_schema({"type": "objekt"}), None, "tools[0].function.parameters", "Invalid schema for function 'f'"),
    (_bad_schema({"type": "object", "properties": {"a": {"minLength": -1}}}), None,
     "tools[0].function.parameters", "Invalid schema"),
    (_bad_schema("a string"), None, "tools[0].function.parameters", "must be a JSON schema object"),
    (_bad_schema({"type": "array"}), None, "tools[0].function.parameters", "must describe an object"),
]


@pytest.mark.parametrize(("tools", "choice", "param", "words"), REFUSED)
def test_refused(tools: list[Any] | None, choice: Any, param: str, words: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        tool_set(tools, choice)
    assert refused.value.param == param
    assert words in str(refused.value)


def test_parallel_tool_calls_false_allows_one_call() -> None:
    assert not tool_set([WEATHER], "required", parallel=False).choice.parallel
