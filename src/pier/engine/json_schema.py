"""A JSON schema as a GBNF grammar, with the converter llama-cpp-python ships (`llama_cpp.llama_grammar`).

The converter silently drops keywords it cannot express (numeric bounds, `not`, `uniqueItems`, ...), which would
let the output break the schema; those are refused up front instead, naming the keyword and where it is. Two
fixes on its output: JSON strings may not hold raw control characters (its `char` rule allows them, and then
`json.loads` refuses the output), and an unanchored `pattern` is matched as a whole (JSON Schema searches, so a
whole match is always valid).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from llama_cpp.llama_grammar import SchemaConverter

from pier.errors import InvalidRequest

# Keywords that constrain values but that the converter ignores: a schema with them could not be guaranteed.
UNSUPPORTED = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "not", "if", "then", "else",
    "uniqueItems", "contains", "minContains", "maxContains", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "dependentRequired", "dependentSchemas", "dependencies",
    "unevaluatedProperties", "unevaluatedItems", "additionalItems",
})
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties")
# Its `char` admits U+0000-U+001F and DEL unescaped; JSON does not.
_CHAR_RULE = re.compile(r"^char ::= .*$", re.MULTILINE)
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})'


class UnsupportedSchema(InvalidRequest):
    """A JSON schema pier cannot turn into a grammar that guarantees it."""


def schema_to_gbnf(schema: Mapping[str, Any] | bool, param: str = "schema") -> str:
    """GBNF whose every sentence is a JSON document valid under `schema`. Raises UnsupportedSchema naming the
    construct (and its JSON pointer) it cannot guarantee; `param` names the request field in the message."""
    if schema is True or schema == {}:
        schema = {}
    elif not isinstance(schema, Mapping):
        raise UnsupportedSchema(f"{param} must be a JSON object (a JSON Schema); got a {type(schema).__name__}.",
                                param=param)
    try:
        unsupported = next(unsupported_keywords(schema), None)
    except RecursionError:
        raise UnsupportedSchema(f"{param} nests too deeply to be a grammar.", param=param) from None
    if unsupported is not None:
        pointer, keyword = unsupported
        raise UnsupportedSchema(
            f"{param} uses `{keyword}` at {pointer or '/'}, which pier cannot enforce while generating. "
            f"Remove it (validate it after generation instead); unsupported: {', '.join(sorted(UNSUPPORTED))}.",
            param=param)
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        resolved = converter.resolve_refs(_anchored(json.loads(json.dumps(schema))), "input")
        converter.visit(resolved, "")
    except (AssertionError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError) as e:
        raise UnsupportedSchema(
            f"{param} could not be turned into a grammar: {_reason(e)}. Use the JSON Schema subset of OpenAI's "
            "structured outputs (type, properties, required, items, enum, const, anyOf, $ref to #/$defs, "
            "string pattern, minLength/maxLength, minItems/maxItems, format date/time/date-time/uuid).",
            param=param) from None
    return _CHAR_RULE.sub(lambda _: _JSON_CHAR, converter.format_grammar())


def unsupported_keywords(schema: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """(JSON pointer, keyword) for each keyword in `schema` or its subschemas that the converter would ignore."""
    if not isinstance(schema, Mapping):
        return
    for keyword in schema:
        if keyword in UNSUPPORTED:
            yield pointer, keyword
    for child, at in _children(schema, pointer):
        yield from unsupported_keywords(child, at)


def _children(schema: Mapping[str, Any], pointer: str) -> Iterator[tuple[Any, str]]:
    for key in _SUBSCHEMA_MAPS:
        if isinstance(schema.get(key), Mapping):
            for name, child in schema[key].items():
                yield child, f"{pointer}/{key}/{name}"
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            for i, child in enumerate(schema[key]):
                yield child, f"{pointer}/{key}/{i}"
    for key in _SUBSCHEMAS:
        if isinstance(schema.get(key), Mapping):
            yield schema[key], f"{pointer}/{key}"
        elif key == "items" and isinstance(schema.get(key), list):
            for i, child in enumerate(schema[key]):
                yield child, f"{pointer}/items/{i}"


def _anchored(schema: Any) -> Any:
    """Every `pattern` anchored at both ends, as the converter requires."""
    if isinstance(schema, dict):
        out = {k: _anchored(v) for k, v in schema.items()}
        pattern = out.get("pattern")
        if isinstance(pattern, str) and not (pattern.startswith("^") and pattern.endswith("$")):
            out["pattern"] = f"^({pattern.removeprefix('^').removesuffix('$')})$"
        return out
    if isinstance(schema, list):
        return [_anchored(v) for v in schema]
    return schema


def _reason(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, KeyError):
        return f"unknown name {text}"
    if isinstance(error, RecursionError):
        return "the schema nests too deeply"
    return text.split("\n", 1)[0][:300]
