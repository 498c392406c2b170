"""The GBNF grammar that makes a forced answer (`tool_choice` "required" or a named function) one or more calls in
the family's format, each naming one of the callable tools with arguments valid for its JSON schema.

The calls' JSON is the structured-output converter's (`engine/json_schema.py`: llama-cpp-python's converter with
JSON-correct strings, refusing keywords it cannot enforce); the text around the calls (markers, separators) is the
family's. With `parallel_tool_calls` false, exactly one call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pier.engine.json_schema import schema_to_gbnf
from pier.model.tools.families import FORMATS, Family
from pier.model.tools.spec import Tool

_ROOT = re.compile(r"^root ::= ", re.MULTILINE)


def _literal(text: str) -> str:
    return json.dumps(text)  # a JSON string literal is a GBNF literal: the same escapes


def call_schema(tool: Tool, name_key: str, args_key: str, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One call of `tool` as a JSON schema, and its parameters' definitions, renamed with `prefix` so the
    definitions of all tools can sit side by side at the top of the whole schema (where `$ref`s resolve)."""
    parameters = dict(tool.parameters)
    definitions = {**parameters.pop("definitions", {}), **parameters.pop("$defs", {})}
    call = {
        "type": "object", "properties": {name_key: {"const": tool.name}, args_key: _renamed(parameters, prefix)},
        "required": [name_key, args_key], "additionalProperties": False,
    }
    return call, {prefix + name: _renamed(d, prefix) for name, d in definitions.items()}


def _renamed(schema: Any, prefix: str) -> Any:
    """Local `$ref`s ("#/$defs/x", "#/definitions/x") pointing at the renamed definitions ("#/$defs/<prefix>x")."""
    if isinstance(schema, dict):
        return {k: (_ref(v, prefix) if k == "$ref" and isinstance(v, str) else _renamed(v, prefix))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_renamed(v, prefix) for v in schema]
    return schema


def _ref(ref: str, prefix: str) -> str:
    for local in ("#/$defs/", "#/definitions/"):
        if ref.startswith(local):
            return "#/$defs/" + prefix + ref[len(local):]
    return ref


def tool_grammar(family: Family, tools: tuple[Tool, ...], *, parallel: bool) -> str:
    """GBNF whose root is the family's calls of `tools`. Raises InvalidRequest (param `tools`) naming what of a
    schema cannot be enforced."""
    fmt = FORMATS[family]
    parts = [call_schema(t, fmt.name_key, fmt.args_key, f"tool{i}-") for i, t in enumerate(tools)]
    calls: dict[str, Any] = {"anyOf": [call for call, _ in parts]}
    definitions = {name: d for _, defs in parts for name, d in defs.items()}
    if definitions:
        calls["$defs"] = definitions
    rules = _ROOT.sub("call ::= ", schema_to_gbnf(calls, param="tools"))
    repeat = f" ( {_literal(fmt.between)} call )*" if parallel else ""
    return f"root ::= {_literal(fmt.open)} call{repeat} {_literal(fmt.close)}\n{rules}"
