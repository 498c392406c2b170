"""Structured output: each API's way of asking for a format, as the GBNF grammar the engine samples under.

OpenAI's `response_format` (`text`, `json_object`, `json_schema` with `strict`) and TGI's `grammar` (`json` with
a schema, `regex`). A schema is enforced as far as a grammar can (`strict` or not: engine/json_schema.py); what
a grammar cannot follow (uniqueItems, multipleOf, ...) is checked after generation (`Structure.check`,
engine/schema_check.py), and the answer says what the check found. Only invalid schemas are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pier.engine.json_schema import schema_grammar, schema_to_gbnf
from pier.engine.regex_gbnf import regex_to_gbnf
from pier.engine.schema_check import SchemaCheck
from pier.errors import InvalidRequest

ANY_JSON_OBJECT: dict[str, Any] = {"type": "object"}


@dataclass(frozen=True)
class Structure:
    """What a request asks its output to be: the grammar to sample under, and the schema to check the finished
    output against (for a JSON schema)."""

    grammar: str | None
    check: SchemaCheck | None = None


def _of_schema(schema: Any, param: str) -> Structure:
    converted = schema_grammar(schema, param=param)
    return Structure(converted.text, SchemaCheck(schema, converted.unenforced))


def response_format_grammar(response_format: Mapping[str, Any] | None) -> str | None:
    """OpenAI's response_format as a grammar; None for plain text."""
    return response_format_structure(response_format).grammar


def tgi_grammar(grammar: Any) -> str | None:
    return tgi_structure(grammar).grammar


def response_format_structure(response_format: Mapping[str, Any] | None) -> Structure:
    """OpenAI's response_format as a grammar (None for plain text) and the check after generation."""
    if response_format is None:
        return Structure(None)
    if not isinstance(response_format, Mapping):
        raise InvalidRequest("response_format must be an object like {\"type\": \"json_object\"}.",
                             param="response_format")
    kind = response_format.get("type", "text")
    if kind == "text":
        return Structure(None)
    if kind == "json_object":
        return Structure(schema_to_gbnf(ANY_JSON_OBJECT, param="response_format"))
    if kind == "json_schema":
        spec = response_format.get("json_schema")
        if not isinstance(spec, Mapping):
            raise InvalidRequest(
                "response_format of type \"json_schema\" needs a `json_schema` object: {\"type\": \"json_schema\", "
                "\"json_schema\": {\"name\": \"...\", \"schema\": {...}, \"strict\": true}}.",
                param="response_format")
        schema = spec.get("schema", {})
        return _of_schema(schema, "response_format.json_schema.schema")
    raise InvalidRequest(f"response_format type {kind!r} is not one of \"text\", \"json_object\", \"json_schema\".",
                         param="response_format")


def tgi_structure(grammar: Any) -> Structure:
    """TGI's `parameters.grammar`: {"type": "json", "value": schema} (the schema may be a JSON string) or
    {"type": "regex", "value": pattern}; also `json_schema`, as TGI 3 spells it."""
    if grammar is None:
        return Structure(None)
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
        return _of_schema(value, "grammar")
    if kind == "regex":
        if not isinstance(value, str):
            raise InvalidRequest("`grammar.value` must be a string holding the regex for a \"regex\" grammar")
        return Structure(regex_to_gbnf(value))
    raise InvalidRequest(f"`grammar.type` must be \"json\" or \"regex\"; got {kind!r}")
