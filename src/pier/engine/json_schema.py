"""A JSON schema as a GBNF grammar: pier's own converter, so every document the grammar allows is JSON and as much
of the schema as a grammar can say holds while generating.

Enforced token by token: type (and type lists, OpenAPI's `nullable`), const, enum, anyOf/oneOf (as alternatives),
allOf (merged), $ref to any local JSON pointer (recursion included), properties/required, additionalProperties
(false, true or a schema), patternProperties, prefixItems/items (and draft 4-7 tuple items with additionalItems),
minItems/maxItems, minLength/maxLength, pattern, format (date, time, date-time, uuid, email, ipv4, hostname, uri),
minimum/maximum/exclusiveMinimum/exclusiveMaximum (integers exactly, digit by digit; decimals exactly for integer
bounds, otherwise within the whole units inside the bounds: engine/int_range.py).

What a grammar cannot say (uniqueItems, multipleOf, not, if/then/else, contains, min/maxProperties, oneOf's
"exactly one", a pattern beside a format, ...) is never refused: the grammar allows the document's shape and
`unenforced` names those keywords, which the caller checks after generation (engine/schema_check.py). The grammar
may write fewer documents than the schema allows (no exponents, no extra properties unless the schema asks for
them, at most 16 integer digits), never one outside its shape.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce
from typing import Any
from urllib.parse import unquote

import jsonschema

from pier.engine.int_range import MAX_DIGITS, decimal_range, integer_range, naturals
from pier.engine.regex_gbnf import UnsupportedRegex, regex_expression
from pier.engine.schema_merge import _merge
from pier.errors import InvalidRequest

_BASE = {
    "space": '" "?',
    "char": r'[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})',
    "string": r'"\"" char* "\"" space',
    "number": '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})? space',
    "integer": '"-"? ("0" | [1-9] [0-9]{0,15}) space',
    "boolean": '("true" | "false") space',
    "null": '"null" space',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" space (string ":" space value ("," space string ":" space value)*)? "}" space',
    "array": '"[" space (value ("," space value)*)? "]" space',
}
_DAY = '("0" [1-9] | [12] [0-9]'
_FORMATS = {  # the string's content, without its quotes
    "date": ('[0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ' + _DAY + ' | "3" [01]) | ("0" [469] | "11") "-" '
             + _DAY + ' | "30") | "02" "-" ' + _DAY + "))"),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? '
             '("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])'),
    "uuid": ' "-" '.join(f"[0-9a-f]{{{n}}}" for n in (8, 4, 4, 4, 12)),
    "email": r'[A-Za-z0-9] [A-Za-z0-9._+\x2D]{0,30} "@" [A-Za-z0-9] [A-Za-z0-9\x2D]{0,30} ("." [A-Za-z]{2,10}){1,2}',
    "ipv4": f'({naturals(0, 255)}) ("." ({naturals(0, 255)})){{3}}',
    "hostname": r'[A-Za-z0-9] [A-Za-z0-9\x2D]{0,30} ("." [A-Za-z0-9] [A-Za-z0-9\x2D]{0,30}){0,3}',
}
_FORMATS["date-time"] = f"({_FORMATS['date']}) \"T\" ({_FORMATS['time']})"
_FORMATS["uri"] = f'"http" "s"? "://" ({_FORMATS["hostname"]}) ("/" [A-Za-z0-9._~\\x2D]{{0,30}}){{0,6}}'
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "$schema", "$id", "$anchor",
                          "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "discriminator",
                          "contentMediaType", "contentEncoding", "strict"})
# Keywords a grammar cannot follow: checked after generation wherever they appear.
_CHECKED_AFTER = ("multipleOf", "uniqueItems", "not", "if", "then", "else", "contains", "minContains",
                  "maxContains", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
                  "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "oneOf")
_OBJECT_KEYS = ("properties", "required", "additionalProperties", "patternProperties")
_ARRAY_KEYS = ("items", "prefixItems", "minItems", "maxItems", "additionalItems")
_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
MAX_REPEAT = 2000  # longer minLength/maxLength/maxItems are checked after generation, not written out


class UnsupportedSchema(InvalidRequest):
    """A JSON schema pier cannot turn into a grammar (not a valid schema, or one nothing satisfies)."""


@dataclass(frozen=True)
class SchemaGrammar:
    """The grammar of a schema, and the keywords it does not enforce (to check after generation)."""

    text: str
    unenforced: frozenset[str]


def schema_to_gbnf(schema: Mapping[str, Any] | bool, param: str = "schema") -> str:
    """GBNF whose every sentence is a JSON document of the schema's shape (see the module's docstring for what
    is enforced). Raises UnsupportedSchema naming the problem; `param` names the request field in the message."""
    return schema_grammar(schema, param).text


def schema_grammar(schema: Mapping[str, Any] | bool, param: str = "schema") -> SchemaGrammar:
    if not isinstance(schema, (Mapping, bool)):
        raise UnsupportedSchema(f"{param} must be a JSON object (a JSON Schema); got a {type(schema).__name__}.",
                                param=param)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/" + "/".join(str(p) for p in e.path)
        raise UnsupportedSchema(f"{param} is not a valid JSON Schema: {e.message[:300]} (at {where}). Fix the "
                                "schema (see https://json-schema.org/understanding-json-schema).",
                                param=param) from None
    except RecursionError:
        raise UnsupportedSchema(f"{param} nests too deeply to be a grammar.", param=param) from None
    converter = _Converter(schema, param)
    converter.rules["root"] = "# the root, written last"  # reserved: no subschema's rule may take the name
    try:
        root = converter.visit(schema, "root")
    except RecursionError:
        raise UnsupportedSchema(f"{param} nests too deeply to be a grammar.", param=param) from None
    return SchemaGrammar(converter.grammar(root), frozenset(converter.unenforced))


def literal(value: Any) -> str:
    """A JSON value, written compactly, as a GBNF string literal."""
    # a JSON string literal is a GBNF literal (the same escapes; other characters as they are, in UTF-8)
    return json.dumps(json.dumps(value, ensure_ascii=False, separators=(",", ":")), ensure_ascii=False)


class _Converter:
    def __init__(self, root: Any, param: str) -> None:
        self.root = root
        self.param = param
        self.rules: dict[str, str] = {}
        self.refs: dict[str, str] = {"#": "root"}
        self.unenforced: set[str] = set()

    def fail(self, why: str) -> UnsupportedSchema:
        return UnsupportedSchema(f"{self.param} {why}", param=self.param)

    def grammar(self, root: str) -> str:
        if root != "root":
            self.rules["root"] = root
        return "\n".join(f"{name} ::= {body}" for name, body in self.rules.items())

    def add(self, name: str, body: str) -> str:
        """A rule for `body`, named after `name` (made unique); a rule with the same body is reused."""
        name = re.sub(r"[^A-Za-z0-9-]+", "-", name).strip("-") or "rule"
        for existing, text in self.rules.items():
            if text == body and existing != "root":
                return existing
        unique, i = name, 1
        while unique in self.rules or unique in _BASE:
            unique, i = f"{name}-{i}", i + 1
        self.rules[unique] = body
        return unique

    def base(self, name: str) -> str:
        if name not in self.rules:
            self.rules[name] = _BASE[name]
            for dep in re.findall(r"\b(?:space|char|string|number|boolean|null|value|object|array)\b",
                                  _BASE[name].replace('"null"', "").replace('"true"', "")):
                if dep != name:
                    self.base(dep)
        return name

    # -- schemas -----------------------------------------------------------------------------------------------

    def visit(self, schema: Any, name: str) -> str:
        if schema is True or schema == {}:
            return self.base("value")
        if schema is False:
            raise self.fail(f"holds the schema `false` (at {name}), which no value satisfies; remove that branch.")
        s = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
        self.unenforced.update(k for k in _CHECKED_AFTER if k in s and k != "oneOf")
        if not s:
            return self.base("value")
        if "$ref" in s:
            ref = s.pop("$ref")
            if not s:
                return self.ref(ref)
            return self.visit({"allOf": [self.target(ref), s]}, name)
        for key in ("anyOf", "oneOf"):
            if key in s:
                alternatives = s.pop(key)
                if key == "oneOf" and len(alternatives) > 1:
                    self.unenforced.add("oneOf")
                return self.alternatives([{"allOf": [s, a]} if s else a for a in alternatives], name)
        if "allOf" in s:
            parts = [self.resolved(p) for p in s.pop("allOf")]
            return self.visit(reduce(_merge, parts, s), name)
        if s.pop("nullable", False) is True:
            return self.alternatives([s, {"type": "null"}], name)
        kind = s.get("type")
        if isinstance(kind, list):
            return self.alternatives([{**s, "type": t} for t in kind], name)
        if "const" in s:
            return self.add(name, f"{literal(s['const'])} {self.base('space')}")
        if "enum" in s:
            self.base("space")
            return self.add(name, "(" + " | ".join(literal(v) for v in s["enum"]) + ") space")
        kind = kind or _inferred_type(s)
        if kind == "object":
            return self.object(s, name)
        if kind == "array":
            return self.array(s, name)
        if kind == "string":
            return self.string(s, name)
        if kind in ("integer", "number"):
            return self.number(s, name, kind)
        if kind in ("boolean", "null"):
            return self.base(kind)
        return self.base("value")

    def alternatives(self, schemas: list[Any], name: str) -> str:
        if not schemas:
            raise self.fail(f"has an empty anyOf/oneOf at {name}; give at least one alternative.")
        return self.add(name, " | ".join(self.visit(a, _child(name, f"alt{i}")) for i, a in enumerate(schemas)))

    def ref(self, ref: str) -> str:
        """The rule of a referenced schema; named before it is visited, so recursion refers to it."""
        if ref in self.refs:
            return self.refs[ref]
        target = self.target(ref)
        name = self.refs[ref] = self.add("ref-" + ref.rsplit("/", 1)[-1], f"# {ref}")  # reserved until written
        self.rules[name] = self.visit(target, name + "-body")
        return name

    def target(self, ref: Any, seen: frozenset[str] = frozenset()) -> Any:
        """The schema a local `$ref` points at (a JSON pointer into this schema, "#" the whole)."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise self.fail(f"has the $ref {ref!r}, which is not local: pier fetches no schemas. Put the schema "
                            "under $defs and refer to it as \"#/$defs/<name>\".")
        if ref in seen:
            raise self.fail(f"has $refs that only refer to each other ({' -> '.join(sorted(seen))}), which no "
                            "value can end.")
        node: Any = self.root
        for part in [unquote(p).replace("~1", "/").replace("~0", "~") for p in ref[1:].split("/")[1:]]:
            if isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            elif isinstance(node, Mapping) and part in node:
                node = node[part]
            else:
                raise self.fail(f"has the $ref {ref!r}, which points at nothing: `{part}` is not there. Define it "
                                "under $defs.")
        if isinstance(node, Mapping) and set(node) - _ANNOTATIONS == {"$ref"}:
            self.target(node["$ref"], seen | {ref})
        return node

    def resolved(self, schema: Any) -> Any:
        """A schema with its top-level $ref replaced by what it points at (for merging)."""
        if isinstance(schema, Mapping) and "$ref" in schema:
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return _merge(self.resolved(self.target(schema["$ref"])), rest)
        return schema

    # -- objects -----------------------------------------------------------------------------------------------

    def object(self, s: dict[str, Any], name: str) -> str:
        space = self.base("space")
        properties = s.get("properties", {})
        required = list(s.get("required", []))
        extra = s.get("additionalProperties")
        patterns = s.get("patternProperties", {})
        if "properties" not in s and not patterns and extra is None and not required:
            return self.base("object")  # named members only when the schema names some (even none: `{}`)
        members = [(literal(k) + f' {space} ":" {space} ' + self.visit(v, _child(name, k)), k in required)
                   for k, v in properties.items()]
        members += [(literal(k) + f' {space} ":" {space} ' + self.base("value"), True)
                    for k in required if k not in properties]
        extras = [f'"\\"" {self.key_pattern(p)} "\\"" {space} ":" {space} '
                  + self.visit(v, _child(name, f"pattern{i}")) for i, (p, v) in enumerate(patterns.items())]
        if extra not in (None, False):
            extras.append(f'{self.base("string")} ":" {space} {self.visit(extra, _child(name, "additional"))}')
        extra_rule = self.add(_child(name, "extra"), " | ".join(extras)) if extras else None
        body = self.members(members, extra_rule, name, 0, False, {})
        return self.add(name, " ".join(p for p in ('"{"', space, body, '"}"', space) if p))

    def key_pattern(self, pattern: str) -> str:
        try:
            return "(" + regex_expression(pattern, self.param, json_string=True) + ")"
        except UnsupportedRegex:
            self.unenforced.add("patternProperties")
            return "char*"

    def members(self, members: list[tuple[str, bool]], extra: str | None, name: str, i: int, comma: bool,
                memo: dict[tuple[int, bool], str]) -> str:
        """The members from the i-th on (`comma`: one was written before), as a rule; "" when none can follow.
        Optional members may be left out; the extra ones (patternProperties, additionalProperties) come last."""
        if (i, comma) in memo:
            return memo[(i, comma)]
        sep = '"," space ' if comma else ""
        if i == len(members):
            body = f'({sep}{extra} ("," space {extra})*)?' if extra else ""
        else:
            member, required = members[i]
            taken = f"{sep}{member} {self.members(members, extra, name, i + 1, True, memo)}".strip()
            skipped = "" if required else self.members(members, extra, name, i + 1, comma, memo)
            body = taken if required else f"({taken} | {skipped})" if skipped else f"({taken})?"
        memo[(i, comma)] = self.add(_child(name, f"m{i}{'c' if comma else ''}"), body) if body else ""
        return memo[(i, comma)]

    # -- arrays ------------------------------------------------------------------------------------------------

    def array(self, s: dict[str, Any], name: str) -> str:
        space = self.base("space")
        items = s.get("items")
        if "prefixItems" in s:
            prefix, tail = list(s["prefixItems"]), items
        elif isinstance(items, list):
            prefix, tail = items, s.get("additionalItems")
        else:
            prefix, tail = [], items if items is not None else True
        low, high = s.get("minItems", 0), s.get("maxItems")
        if high is not None and high > MAX_REPEAT:
            self.unenforced.add("maxItems")
            high = None
        if tail is None:
            tail = low > len(prefix)
        rules = [self.visit(p, _child(name, f"item{i}")) for i, p in enumerate(prefix)]
        tail_rule = None if tail is False else self.visit(tail, _child(name, "item"))
        body = self.elements(rules, tail_rule, low, high, 0)
        return self.add(name, " ".join(p for p in ('"["', space, body, '"]"', space) if p))

    def elements(self, rules: list[str], tail: str | None, low: int, high: int | None, i: int) -> str:
        if high is not None and i >= high:
            return ""
        sep = '"," space ' if i else ""
        if i < len(rules):
            rest = self.elements(rules, tail, low, high, i + 1)
            taken = f"{sep}{rules[i]} {rest}".strip()
            return taken if i < low else f"({taken})?"
        if tail is None:
            if i < low:
                raise self.fail(f"asks for at least {low} items but allows only {i}.")
            return ""
        more_low = max(0, low - i)
        more_high = None if high is None else high - i
        if i:
            return f'("," space {tail}){_times(more_low, more_high)}'
        more = "" if more_high == 1 else f' ("," space {tail})' + _times(max(0, more_low - 1), (
            None if more_high is None else more_high - 1))
        return f"{tail}{more}" if more_low else f"({tail}{more})?"

    # -- strings and numbers ---------------------------------------------------------------------------------

    def string(self, s: dict[str, Any], name: str) -> str:
        space = self.base("space")
        fmt, pattern = s.get("format"), s.get("pattern")
        content = None
        if fmt in _FORMATS:
            content = _FORMATS[fmt]
            self.unenforced.update(k for k in ("pattern", "minLength", "maxLength") if k in s)
        elif fmt is not None:
            self.unenforced.add("format")
        if content is None and isinstance(pattern, str):
            try:
                content = regex_expression(pattern, self.param, json_string=True)
                self.unenforced.update(k for k in ("minLength", "maxLength") if k in s)
            except UnsupportedRegex:
                self.unenforced.add("pattern")
        if content is None:
            low, high = s.get("minLength", 0), s.get("maxLength")
            if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
                self.unenforced.update(k for k in ("minLength", "maxLength") if k in s)
                low, high = 0, None
            content = self.base("char") + _times(low, high)
        return self.add(name, f'"\\"" {content} "\\"" {space}')

    def number(self, s: dict[str, Any], name: str, kind: str) -> str:
        space = self.base("space")
        minimum, maximum = _bound(s, "minimum"), _bound(s, "maximum")
        exclusive_min, exclusive_max = _bound(s, "exclusiveMinimum"), _bound(s, "exclusiveMaximum")
        # draft 4 spells exclusiveness as a boolean beside minimum/maximum
        low_excl = s.get("exclusiveMinimum") is True or (exclusive_min is not None and (
            minimum is None or exclusive_min >= minimum))
        high_excl = s.get("exclusiveMaximum") is True or (exclusive_max is not None and (
            maximum is None or exclusive_max <= maximum))
        low = exclusive_min if exclusive_min is not None and low_excl else minimum
        high = exclusive_max if exclusive_max is not None and high_excl else maximum
        if low is None and high is None:
            return self.base(kind)
        if kind == "integer":
            body = integer_range(_int_low(low, low_excl), _int_high(high, high_excl))
            if body is None:
                raise self.fail(f"asks for an integer between {low} and {high} (at {name}), and there is none.")
        else:
            body = decimal_range(low, high, exclusive_min=low_excl, exclusive_max=high_excl)
            if body is None:  # narrower than one unit: any number, checked after generation
                self.unenforced.update(k for k in _NUMBER_KEYS if k in s)
                return self.base(kind)
        return self.add(name, f"({body}) {space}")


def _child(name: str, part: str) -> str:
    """A subschema's rule name: its parent's and its own part (the root's children by their part alone, so a
    caller can refer to a root property's rule by the property's name, as model/tools/tool_grammar.py does)."""
    return part if name == "root" else f"{name}-{part}"


def _bound(s: Mapping[str, Any], key: str) -> float | None:
    value = s.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if abs(value) < 10 ** MAX_DIGITS else None


def _int_low(value: float | None, exclusive: bool) -> int | None:
    if value is None:
        return None
    return math.floor(value) + 1 if exclusive else math.ceil(value)


def _int_high(value: float | None, exclusive: bool) -> int | None:
    if value is None:
        return None
    return math.ceil(value) - 1 if exclusive else math.floor(value)


def _times(low: int, high: int | None) -> str:
    if high is None:
        return "*" if low == 0 else "+" if low == 1 else f"{{{low},}}"
    return "?" if (low, high) == (0, 1) else f"{{{low}}}" if low == high else f"{{{low},{high}}}"


def _inferred_type(s: Mapping[str, Any]) -> str | None:
    for kind, keys in (("object", _OBJECT_KEYS), ("array", _ARRAY_KEYS), ("string", _STRING_KEYS),
                       ("number", _NUMBER_KEYS)):
        if any(k in s for k in keys):
            return kind
    return None
