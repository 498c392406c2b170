"""The GBNF grammar that makes a forced answer (`tool_choice` "required" or a named function) one or more calls in
the family's format, each naming one of the callable tools with arguments valid for its JSON schema.

The calls' JSON comes from llama-cpp-python's JSON-schema-to-GBNF converter (the one llama.cpp ships); the text
around them (markers, separators) is the family's. With `parallel_tool_calls` false, exactly one call.
"""

from __future__ import annotations

import json
from typing import Any

from pier.errors import InvalidRequest
from pier.model.tools.families import FORMATS, Family
from pier.model.tools.spec import Tool


def _literal(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a GBNF literal: the same escapes


def call_schema(tool: Tool, name_key: str, args_key: str) -> dict[str, Any]:
    return {
        "type": "object", "properties": {name_key: {"const": tool.name}, args_key: dict(tool.parameters)},
        "required": [name_key, args_key], "additionalProperties": False,
    }


def tool_grammar(family: Family, tools: tuple[Tool, ...], *, parallel: bool) -> str:
    """GBNF whose root is the family's calls of `tools`. Raises InvalidRequest naming a schema the converter
    cannot turn into a grammar."""
    from llama_cpp.llama_grammar import SchemaConverter  # pure Python; imported when a call is forced

    fmt = FORMATS[family]
    converter = SchemaConverter(prop_order={fmt.name_key: 0, fmt.args_key: 1}, allow_fetch=False, dotall=False,
                                raw_pattern=False)
    alternatives = []
    for tool in tools:
        schema = call_schema(tool, fmt.name_key, fmt.args_key)
        try:
            schema = converter.resolve_refs(schema, tool.name)
            alternatives.append(converter.visit(schema, f"call-{tool.name}"))
        except Exception as error:
            raise InvalidRequest(
                f"The parameters of function {tool.name!r} cannot be enforced as a grammar ({type(error).__name__}: "
                f"{error}); simplify the schema, or use tool_choice \"auto\".", param="tools",
            ) from None
    rules = converter.format_grammar()
    call = " | ".join(alternatives)
    repeat = f" ( {_literal(fmt.between)} call )*" if parallel else ""
    head = f"root ::= {_literal(fmt.open)} call{repeat} {_literal(fmt.close)}\ncall ::= {call}\n"
    return head + rules
