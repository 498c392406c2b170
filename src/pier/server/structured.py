"""Structured output: each API's way of asking for a format, as the GBNF grammar the engine samples under.

OpenAI's `response_format` (`text`, `json_object`, `json_schema` with `strict`) and TGI's `grammar` (`json` with
a schema, `regex`). A schema is always enforced whole (`strict` or not: the grammar cannot half-follow it), and
what cannot be enforced is refused with a 400 naming it (engine/json_schema.py, engine/regex_gbnf.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pier.engine.json_schema import schema_to_gbnf
from pier.engine.regex_gbnf import regex_to_gbnf
from pier.errors import InvalidRequest

ANY_JSON_OBJECT: dict[str, Any] = {"type": "object"}


def response_format_grammar(response_format: Mapping[str, Any] | None) -> str | None:
    """OpenAI's response_format as a grammar; None for plain text."""
    if response_format is None:
        return None
    if not isinstance(response_format, Mapping):
        raise InvalidRequest("response_format must be an object like {\"type\": \"json_object\"}.",
                             param="response_format")
    kind = response_format.get("type", "text")
    if kind == "text":
        return None
    if kind == "json_object":
        return schema_to_gbnf(ANY_JSON_OBJECT, param="response_format")
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping):
            raise InvalidRequest(
                "response_format of type \"json_schema\" needs a `json_schema` object: {\"type\": \"json_schema\", "
                "\"json_schema\": {\"name\": \"...\", \"schema\": {...}, \"strict\": true}}.",
                param="response_format")
        schema = spec.get("schema", {})
        return schema_to_gbnf(schema, param="response_format.json_schema.schema")
    raise InvalidRequest(f"response_format type {kind!r} is not one of \"text\", \"json_object\", \"json_schema\".",
                         param="response_format")


def tgi_grammar(grammar: Any) -> str | None:
    """TGI's `parameters.grammar`: {"type": "json", "value": schema} (the schema may be a JSON string) or
    {"type": "regex", "value": pattern}; also `json_schema`, as TGI 3 spells it."""
    if grammar is None:
        return None
    if not isinstance(grammar, Mapping) or "type" not in grammar or "value" not in grammar:
        raise InvalidRequest("`grammar` must be {\"type\": \"json\", \"value\": <JSON schema>} or "
                             "{\"type\": \"regex\", \"value\": \"<pattern>\"}")
    kind, value = grammar["type"], grammar["value"]
    if kind in ("json", "json_schema"):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise InvalidRequest(f"`grammar.value` is a string but not JSON: {e}. Send the JSON schema "
                                     "as an object.") from None
        if kind == "json_schema" and isinstance(value, Mapping) and "schema" in value:
            value = value["schema"]
        return schema_to_gbnf(value, param="grammar")
    if kind == "regex":
        if not isinstance(value, str):
            raise InvalidRequest("`grammar.value` must be a string holding the regex for a \"regex\" grammar")
        return regex_to_gbnf(value)
    raise InvalidRequest(f"`grammar.type` must be \"json\" or \"regex\"; got {kind!r}")
