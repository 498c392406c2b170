"""JSON schemas as grammars: what every generated document is checked against with `jsonschema` (over the fake
runner, greedy and sampled), and the constructs that are refused by name."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from pier.engine.core import EngineConfig, EngineCore
from pier.engine.fake import FakeRunner
from pier.engine.grammar import check_grammar
from pier.engine.json_schema import UnsupportedSchema, schema_to_gbnf
from pier.engine.request import FinishReason, GenerateRequest, SamplingParams

from .conftest import run

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
    ({"type": "integer", "minimum": 0}, "`minimum` at /"),
    ({"type": "object", "properties": {"a": {"type": "number", "exclusiveMaximum": 3}}},
     "`exclusiveMaximum` at /properties/a"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "`uniqueItems` at /"),
    ({"anyOf": [{"type": "string"}, {"not": {"type": "null"}}]}, "`not` at /anyOf/1"),
    ({"$defs": {"t": {"type": "object", "patternProperties": {"^x": {}}}}, "$ref": "#/$defs/t"},
     "`patternProperties` at /$defs/t"),
    ({"type": "wibble"}, "could not be turned into a grammar"),
    ({"$ref": "https://example.com/schema.json"}, "could not be turned into a grammar"),
    ({"$ref": "#/$defs/missing"}, "could not be turned into a grammar"),
    ([1, 2], "must be a JSON object"),
    ({"$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x"}, "could not be turned into a grammar"),
])
def test_a_schema_pier_cannot_guarantee_is_refused_naming_the_construct(schema: Any, named: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        schema_to_gbnf(schema, param="response_format")
    assert named in caught.value.message
    assert caught.value.param == "response_format"


@pytest.mark.parametrize("schema", [True, {}, {"type": "object"}, {"type": "array"}, {"enum": [1, "two", None]}])
def test_open_schemas_compile(schema: Any) -> None:
    check_grammar(FakeRunner().vocab, schema_to_gbnf(schema))


def test_strings_hold_no_raw_control_characters() -> None:
    assert r"\x00-\x1F" in schema_to_gbnf({"type": "string"})
