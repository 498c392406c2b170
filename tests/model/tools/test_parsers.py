"""Each family's parser on the answers its models write, and on answers that only look like calls."""

from __future__ import annotations

import pytest

from pier.model.tools.families import Family, family_of
from pier.model.tools.parsers import PARSERS, Parsed, ToolCall

W = ToolCall("get_weather", '{"city": "Paris"}')
T = ToolCall("get_time", "{}")

CASES: list[tuple[Family, str, Parsed]] = [
    # Hermes / Qwen
    (Family.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
     Parsed(None, (W,))),
    (Family.HERMES, 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
     '\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>', Parsed("Let me look.\n", (W, T))),
    (Family.HERMES, '<tool_call>{"arguments": {"city": "Paris"}, "name": "get_weather"}</tool_call>',
     Parsed(None, (W,))),
    (Family.HERMES, '<tool_call>\n{"name": "get_time"}\n</tool_call>', Parsed(None, (T,))),
    (Family.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}\n</tool_call>',
     Parsed(None, (W,))),
    (Family.HERMES, "It is sunny.", Parsed("It is sunny.")),
    (Family.HERMES, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
     Parsed('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par')),  # cut off: content
    (Family.HERMES, '<tool_call>\n{"name": 3, "arguments": {}}\n</tool_call>',
     Parsed('<tool_call>\n{"name": 3, "arguments": {}}\n</tool_call>')),  # not a name
    (Family.HERMES, '<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>',
     Parsed('<tool_call>\n{"name": "f", "arguments": [1]}\n</tool_call>')),  # arguments not an object
    (Family.HERMES, "<tool_call>\nno json here\n</tool_call>", Parsed("<tool_call>\nno json here\n</tool_call>")),
    # Llama 3.x
    (Family.LLAMA3, '{"name": "get_weather", "parameters": {"city": "Paris"}}', Parsed(None, (W,))),
    (Family.LLAMA3, '  {"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
     Parsed(None, (W,))),
    (Family.LLAMA3, '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}', Parsed(None, (W,))),
    (Family.LLAMA3, '{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}',
     Parsed(None, (W, T))),
    (Family.LLAMA3, '{"answer": 42}', Parsed('{"answer": 42}')),
    (Family.LLAMA3, 'Use {"name": "get_time"} like this', Parsed('Use {"name": "get_time"} like this')),
    # Mistral
    (Family.MISTRAL, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
     '{"name": "get_time", "arguments": {}, "id": "abcdefghi"}]', Parsed(None, (W, T))),
    (Family.MISTRAL, '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]', Parsed(None, (W,))),
    (Family.MISTRAL, "[TOOL_CALL] no", Parsed("[TOOL_CALL] no")),
    # Granite
    (Family.GRANITE, '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]', Parsed(None, (W,))),
    # FireFunction v2
    (Family.FIREFUNCTION, ' functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]', Parsed(None, (W,))),
    # Functionary v3.1 / Llama 3.1's custom-tool format
    (Family.FUNCTIONARY, 'Checking. <function=get_weather>{"city": "Paris"}</function><function=get_time>{}</function>',
     Parsed("Checking. ", (W, T))),
    (Family.FUNCTIONARY, '<function=get_weather>{"city": "Par', Parsed('<function=get_weather>{"city": "Par')),
    (Family.FUNCTIONARY, "<function=get_weather>no</function>", Parsed("<function=get_weather>no</function>")),
    # Command R7B
    (Family.COMMAND_R7B, '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
     '{"city": "Paris"}}]<|END_ACTION|>', Parsed(None, (W,))),
]


@pytest.mark.parametrize(("family", "text", "expected"), CASES)
def test_parser(family: Family, text: str, expected: Parsed) -> None:
    assert PARSERS[family](text) == expected


TEMPLATES = [
    ("{% for tool in tools %}{{ tool | tojson }}{% endfor %}<tool_call>", Family.HERMES),
    ("{{- '[TOOL_CALLS][' }}{% for m in messages %}{% endfor %}", Family.MISTRAL),
    ("<|start_header_id|>ipython<|end_header_id|>", Family.LLAMA3),
    ("{{ '<|python_tag|>' }}", Family.LLAMA3),
    ("<|tool_call|>", Family.GRANITE),
    ("{{ ' functools[' }}", Family.FIREFUNCTION),
    ("<|START_ACTION|>", Family.COMMAND_R7B),
    ("{{ '<function=' + tool_call.name + '>' }}", Family.FUNCTIONARY),
    ("<tool_call>\n<function=name>", Family.HERMES),  # Qwen3-Coder's XML calls sit in Hermes tags
    ("{% for m in messages %}{{ m.content }}{% endfor %}", None),
]


@pytest.mark.parametrize(("template", "family"), TEMPLATES)
def test_family_of_template(template: str, family: Family | None) -> None:
    assert family_of(template) == family
