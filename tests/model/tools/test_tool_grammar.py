"""Forced calls' grammars: valid GBNF for llama.cpp, in each family's format, and refused schemas."""

from __future__ import annotations

import json

import pytest

from pier.errors import InvalidRequest
from pier.model.tools.families import FORMATS, Family
from pier.model.tools.tool_grammar import tool_grammar
from pier.model.tools.tool_spec import Tool, tool_set

TOOLS = tool_set([
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "get-time"}},
], "required").tools


@pytest.mark.parametrize("family", list(Family))
@pytest.mark.parametrize("parallel", [True, False])
def test_grammar_is_valid_gbnf_in_the_family_format(family: Family, parallel: bool) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    grammar = tool_grammar(family, TOOLS, parallel=parallel)
    LlamaGrammar.from_string(grammar, verbose=False)  # raises on a grammar llama.cpp cannot parse
    fmt = FORMATS[family]
    root, call = grammar.splitlines()[:2]
    assert root.startswith(f"root ::= {json.dumps(fmt.open)} call" if fmt.open else "root ::= call")
    assert ("call )*" in root) == parallel
    if fmt.tagged:
        assert call == ('call ::= "<function=get_weather>" fn0 "</function>" | "<function=get-time>" fn1 '
                        '"</function>"')
    else:
        assert f'"\\"{fmt.name_key}\\""' in grammar and f'"\\"{fmt.args_key}\\""' in grammar


def test_a_tools_numeric_bounds_are_in_its_calls_grammar() -> None:
    tool = Tool("f", parameters={"type": "object", "properties": {"a": {"type": "integer", "minimum": 3,
                                                                        "maximum": 7}}, "required": ["a"]})
    grammar = tool_grammar(Family.HERMES, (tool,), parallel=False)
    assert "[3-7]" in grammar


def test_a_schema_nothing_satisfies_is_a_400_naming_it() -> None:
    tool = Tool("f", parameters={"type": "object", "properties": {"a": {"type": "integer", "minimum": 3,
                                                                        "maximum": 2}}})
    with pytest.raises(InvalidRequest, match="there is none") as refused:
        tool_grammar(Family.HERMES, (tool,), parallel=False)
    assert refused.value.param == "tools"


def test_a_tools_own_refs_still_resolve_inside_the_calls() -> None:
    tool = Tool("f", parameters={"type": "object", "properties": {"a": {"$ref": "#/$defs/small"}},
                                 "$defs": {"small": {"enum": ["x", "y"]}}})
    grammar = tool_grammar(Family.HERMES, (tool,), parallel=False)
    assert '"\\"x\\""' in grammar
