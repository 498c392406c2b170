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
from pier.model.tools.tool_spec import Tool

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


def _definitions(tool: Tool, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tool's parameters without their definitions, and the definitions renamed with `prefix`."""
    parameters = dict(tool.parameters)
    definitions = {**parameters.pop("definitions", {}), **parameters.pop("$defs", {})}
    return _renamed(parameters, prefix), {prefix + name: _renamed(d, prefix) for name, d in definitions.items()}


def _around(fmt_open: str, body: str, fmt_close: str) -> str:
    return " ".join(part for part in (_literal(fmt_open) if fmt_open else "", body,
                                      _literal(fmt_close) if fmt_close else "") if part)


def tool_grammar(family: Family, tools: tuple[Tool, ...], *, parallel: bool) -> str:
    """GBNF whose root is the family's calls of `tools`. Raises InvalidRequest (param `tools`) naming what of a
    schema cannot be enforced."""
    fmt = FORMATS[family]
    if fmt.tagged:
        call, rules = _tagged_calls(tools)
    else:
        call, rules = _object_calls(tools, fmt.name_key, fmt.args_key)
    between = _literal(fmt.between) + " " if fmt.between else ""
    repeat = f" ( {between}call )*" if parallel else ""
    return f"root ::= {_around(fmt.open, 'call' + repeat, fmt.close)}\ncall ::= {call}\n{rules}"


def _object_calls(tools: tuple[Tool, ...], name_key: str, args_key: str) -> tuple[str, str]:
    """Calls as JSON objects holding the name and the arguments."""
    parts = [call_schema(t, name_key, args_key, f"tool{i}-") for i, t in enumerate(tools)]
    calls: dict[str, Any] = {"anyOf": [call for call, _ in parts]}
    definitions = {name: d for _, defs in parts for name, d in defs.items()}
    if definitions:
        calls["$defs"] = definitions
    rules = schema_to_gbnf(calls, param="tools")
    return "whole-call", _ROOT.sub("whole-call ::= ", rules)


def _tagged_calls(tools: tuple[Tool, ...]) -> tuple[str, str]:
    """Calls as `<function=NAME>{arguments}</function>`: each tool's arguments are one property of a wrapper
    object, so the converter writes one rule per tool (`fn<i>`) in a single grammar."""
    parts = [_definitions(t, f"tool{i}-") for i, t in enumerate(tools)]
    wrapper: dict[str, Any] = {"type": "object", "properties": {f"fn{i}": p for i, (p, _) in enumerate(parts)},
                               "required": [f"fn{i}" for i in range(len(parts))], "additionalProperties": False}
    definitions = {name: d for _, defs in parts for name, d in defs.items()}
    if definitions:
        wrapper["$defs"] = definitions
    rules = _ROOT.sub("unused-wrapper ::= ", schema_to_gbnf(wrapper, param="tools"))
    call = " | ".join(f"{_literal(f'<function={t.name}>')} fn{i} {_literal('</function>')}"
                      for i, t in enumerate(tools))
    return call, rules
