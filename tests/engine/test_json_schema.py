"""JSON schemas as grammars: what every generated document is checked against with `jsonschema` (over the fake
runner, greedy and sampled), each keyword's accepted and refused documents under llama.cpp's grammar sampler,
what is left to the check after generation, and the schemas refused (invalid ones, ones nothing satisfies)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.grammar import check_grammar
from pier.engine.json_schema import UnsupportedSchema, schema_grammar, schema_to_gbnf
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams
from pier.engine.schema_check import SchemaCheck

from .conftest import grammar_accepts, run

SCHEMAS: dict[str, dict[str, Any]] = {
    "object": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}, "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3}},
        "required": ["name", "age", "ok", "tags"], "additionalProperties": False},
    "optional-and-null": {"type": "object", "properties": {
        "x": {"type": ["number", "null"]}, "y": {"const": "fixed"}, "z": {"type": "string", "maxLength": 4}},
        "required": ["y"]},
    "refs-and-anyof": {"$defs": {"point": {"type": "object", "properties": {
        "x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"]}},
        "type": "array", "items": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "boolean"}]}, "maxItems": 2},
    "pattern-and-formats": {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "[A-Z]{2}-[0-9]{3}"}, "day": {"type": "string", "format": "date"},
        "id": {"type": "string", "format": "uuid"}}, "required": ["code", "day", "id"]},
    "bounded-string": {"type": "string", "minLength": 2, "maxLength": 6},
    "pydantic-style": {"$defs": {"Address": {"type": "object", "properties": {
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}, "city": {"type": "string", "maxLength": 10}},
        "required": ["zip", "city"]}}, "type": "object", "properties": {
        "age": {"type": "integer", "minimum": 18, "maximum": 99}, "score": {"type": "number", "exclusiveMinimum": 0,
                                                                            "maximum": 5},
        "born": {"type": "string", "format": "date"}, "home": {"$ref": "#/$defs/Address"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2},
        "nick": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}], "default": None}},
        "required": ["age", "score", "born", "home", "tags"]},
    "recursive": {"$defs": {"t": {"type": "object", "properties": {"kids": {"type": "array", "maxItems": 2,
                                                                            "items": {"$ref": "#/$defs/t"}}},
                                  "required": ["kids"]}}, "$ref": "#/$defs/t"},
    "extra-members": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}},
                      "patternProperties": {"^x-[a-z]{1,3}$": {"type": "boolean"}},
                      "additionalProperties": False, "required": ["id"]},
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_document_generated_under_a_schema_validates(name: str) -> None:
    schema = SCHEMAS[name]
    grammar = schema_to_gbnf(schema)
    core = EngineCore(FakeRunner(n_ctx=2048, n_batch=256), EngineConfig(max_running=8, step_tokens=256))
    requests = [GenerateRequest(f"r{i}", f"hello {i}", SamplingParams(temperature=t, seed=i, grammar=grammar),
                                max_tokens=400) for i, t in enumerate([0.0, 0.7, 1.0, 1.5] * 4)]
    out = run(core, *requests)
    for request in requests:
        assert out.last(request.request_id).finish_reason is FinishReason.STOP
        jsonschema.validate(json.loads(out.text(request.request_id)), schema)


@pytest.mark.parametrize(("schema", "named"), [
    ({"type": "wibble"}, "is not a valid JSON Schema"),
    ({"type": "integer", "minimum": "zero"}, "is not a valid JSON Schema"),
    ({"$ref": "https://example.com/schema.json"}, "is not local"),
    ({"$ref": "#/$defs/missing"}, "points at nothing"),
    ([1, 2], "must be a JSON object"),
    ({"$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x"}, "only refer to each other"),
    ({"type": "integer", "minimum": 3, "maximum": 2}, "there is none"),
    ({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}, "there is none"),
    ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "no value satisfies"),
])
def test_a_schema_nothing_can_satisfy_or_that_is_not_one_is_refused_saying_why(schema: Any, named: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        schema_to_gbnf(schema, param="response_format")
    assert named in caught.value.message
    assert caught.value.param == "response_format"


# Each keyword: strings the grammar must take, strings it must refuse (a JSON document each, as generated).
KEYWORDS: list[tuple[str, dict[str, Any], list[str], list[str]]] = [
    ("minimum/maximum", {"type": "integer", "minimum": 18, "maximum": 130}, ["18", "42", "130"],
     ["17", "131", "-18", "018", "1e2", "42.0"]),
    ("exclusiveMinimum", {"type": "integer", "exclusiveMinimum": 0}, ["1", "9", "123456"], ["0", "-1"]),
    ("exclusiveMaximum", {"type": "integer", "exclusiveMaximum": -5}, ["-6", "-600"], ["-5", "0", "7"]),
    ("draft-4 exclusive", {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer", "minimum": 0,
                          "exclusiveMinimum": True}, ["1"], ["0"]),
    ("number bounds", {"type": "number", "minimum": 0, "maximum": 1}, ["0", "0.25", "1"], ["1.5", "-0.1", "2"]),
    ("number exclusive", {"type": "number", "exclusiveMinimum": 0, "maximum": 10}, ["0.5", "10", "3.14"],
     ["0", "0.0", "10.5", "-1"]),
    ("float bounds", {"type": "number", "minimum": -1.5, "maximum": 2.5}, ["-1", "0.75", "2"], ["-2", "3", "2.6"]),
    ("minLength/maxLength", {"type": "string", "minLength": 2, "maxLength": 3}, ['"ab"', '"abc"', '"a\\n"'],
     ['"a"', '"abcd"', '"a\nb"']),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"}, ['"AB-123"'], ['"ab-123"', '"AB-12"']),
    ("pattern unanchored", {"type": "string", "pattern": "x+"}, ['"xx"'], ['"ax"']),
    ("pattern with quote", {"type": "string", "pattern": '^a"b$'}, ['"a\\"b"'], ['"a"b"']),
    ("format date", {"type": "string", "format": "date"}, ['"2024-02-29"', '"1999-12-31"'],
     ['"2024-13-01"', '"2024-04-31"', '"24-01-01"']),
    ("format time", {"type": "string", "format": "time"}, ['"23:59:59Z"', '"08:00:00.5+02:00"'],
     ['"24:00:00Z"', '"08:00:00"']),
    ("format date-time", {"type": "string", "format": "date-time"}, ['"2024-05-01T10:00:00Z"'],
     ['"2024-05-01 10:00:00Z"']),
    ("format uuid", {"type": "string", "format": "uuid"}, ['"123e4567-e89b-12d3-a456-426614174000"'],
     ['"123e4567e89b12d3a456426614174000"']),
    ("format email", {"type": "string", "format": "email"}, ['"ada.l@example.com"'], ['"ada"', '"@x.com"']),
    ("format ipv4", {"type": "string", "format": "ipv4"}, ['"192.168.0.255"'], ['"256.1.1.1"', '"1.2.3"']),
    ("minItems/maxItems", {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
     ["[1]", "[1,2]"], ["[]", "[1,2,3]"]),
    ("prefixItems", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
     ['["a",1]', '["a"]', "[]"], ['[1,"a"]', '["a",1,2]']),
    ("prefixItems+items", {"type": "array", "prefixItems": [{"const": 0}], "items": {"type": "boolean"},
                           "minItems": 2}, ["[0,true]", "[0,true,false]"], ["[0]", "[0,1]", "[true,true]"]),
    ("tuple items (draft 7)", {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array",
                               "items": [{"type": "null"}], "additionalItems": False},
     ["[null]", "[]"], ["[null,null]"]),
    ("enum", {"enum": ["red", 1, None, {"a": [1]}]}, ['"red"', "1", "null", '{"a":[1]}'], ['"blue"', "2"]),
    ("const", {"const": "fixed"}, ['"fixed"'], ['"other"']),
    ("enum beyond ASCII", {"enum": ["é", "😀", "a\nb"]}, ['"é"', '"😀"', '"a\\nb"'], ['"e"', '"a\nb"']),
    ("anyOf", {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "string", "maxLength": 1}]},
     ["5", '"a"'], ["4", '"ab"']),
    ("oneOf", {"oneOf": [{"type": "boolean"}, {"type": "null"}]}, ["true", "null"], ["0"]),
    ("allOf", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     ['{"a":1,"b":"x"}'], ['{"a":1}', '{"b":"x"}']),
    ("allOf bounds", {"allOf": [{"type": "integer", "minimum": 0}, {"maximum": 9}]}, ["0", "9"], ["10", "-1"]),
    ("$ref/$defs", {"$defs": {"p": {"type": "integer", "minimum": 1}}, "type": "array",
                    "items": {"$ref": "#/$defs/p"}}, ["[1,2]"], ["[0]"]),
    ("$ref recursion", {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        "required": ["v", "next"]}}, "$ref": "#/$defs/node"},
     ['{"v":1,"next":{"v":2,"next":null}}'], ['{"v":1,"next":{"v":2}}']),
    ("$ref to root", {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}},
                      "required": ["kids"]}, ['{"kids":[{"kids":[]}]}'], ['{"kids":[{}]}']),
    ("additionalProperties false", {"type": "object", "properties": {"a": {"type": "integer"}},
                                    "additionalProperties": False}, ["{}", '{"a":1}'], ['{"b":1}']),
    ("additionalProperties schema", {"type": "object", "additionalProperties": {"type": "integer"}},
     ['{"x":1,"y":2}', "{}"], ['{"x":"1"}']),
    ("patternProperties", {"type": "object", "patternProperties": {"^n_[a-z]+$": {"type": "number"}},
                           "additionalProperties": False}, ['{"n_ab":1.5}'], ['{"x":1}', '{"n_ab":"1"}']),
    ("no properties named", {"type": "object", "properties": {}}, ["{}"], ['{"a":1}']),
    ("any object", {"type": "object"}, ["{}", '{"a":[1]}'], ["[]"]),
    ("required without properties", {"type": "object", "required": ["id"]}, ['{"id":[1]}'], ["{}"]),
    ("optional members", {"type": "object", "properties": {"a": {"const": 1}, "b": {"const": 2},
                                                           "c": {"const": 3}}, "required": ["b"]},
     ['{"b":2}', '{"a":1,"b":2}', '{"b":2,"c":3}', '{"a":1,"b":2,"c":3}'], ["{}", '{"a":1,"c":3}', '{"b":2,}']),
    ("nullable type list", {"type": ["string", "null"], "maxLength": 1}, ['"a"', "null"], ['"ab"', "1"]),
    ("nullable (OpenAPI)", {"type": "integer", "nullable": True, "minimum": 0}, ["0", "null"], ["-1"]),
    ("no control characters", {"type": "string"}, ['"a\\tb"'], ['"a\tb"', '"a\x00"']),
]


@pytest.mark.parametrize(("keyword", "schema", "takes", "refuses"), KEYWORDS, ids=[k[0] for k in KEYWORDS])
def test_each_keyword_is_enforced_while_generating(keyword: str, schema: dict[str, Any], takes: list[str],
                                                   refuses: list[str]) -> None:
    converted = schema_grammar(schema)
    assert grammar_accepts(converted.text, *takes) == [True] * len(takes)
    assert grammar_accepts(converted.text, *refuses) == [False] * len(refuses)
    assert [SchemaCheck(schema, converted.unenforced).violations(document) for document in takes] == [[]] * len(takes)
    assert converted.unenforced <= {"oneOf"}


@pytest.mark.parametrize(("schema", "unenforced"), [
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, {"uniqueItems"}),
    ({"type": "number", "multipleOf": 0.5}, {"multipleOf"}),
    ({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}, {"not"}),
    ({"type": "object", "additionalProperties": True, "minProperties": 2}, {"minProperties"}),
    ({"type": "string", "format": "date", "pattern": "^2"}, {"pattern"}),
    ({"type": "string", "pattern": "(?=a)a"}, {"pattern"}),
    ({"type": "number", "minimum": 0.25, "maximum": 0.5}, {"minimum", "maximum"}),
    ({"type": "string", "format": "ipv6"}, {"format"}),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, {"oneOf"}),
])
def test_what_a_grammar_cannot_follow_is_named_not_refused(schema: dict[str, Any], unenforced: set[str]) -> None:
    converted = schema_grammar(schema)
    assert converted.unenforced == unenforced
    check_grammar(FakeRunner().vocab, converted.text)


@pytest.mark.parametrize("schema", [True, {}, {"type": "object"}, {"type": "array"}, {"enum": [1, "two", None]}])
def test_open_schemas_compile(schema: Any) -> None:
    check_grammar(FakeRunner().vocab, schema_to_gbnf(schema))


def test_strings_hold_no_raw_control_characters() -> None:
    assert r"\x00-\x1F" in schema_to_gbnf({"type": "string"})
