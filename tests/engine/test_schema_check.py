"""The check after generation: what breaks a schema is named with where it is, formats are checked, OpenAPI's
nullable is understood, and the report says nothing when there is nothing to say."""

from __future__ import annotations

from typing import Any

import pytest

from pier.engine.schema_check import SchemaCheck

ARRAY = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}


@pytest.mark.parametrize(("schema", "text", "violations"), [
    (ARRAY, "[1,2]", []),
    (ARRAY, "[1,1]", ["/: [1, 1] has non-unique elements"]),
    ({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.5}}}, '{"x":0.7}',
     ["/x: 0.7 is not a multiple of 0.5"]),
    ({"type": "string", "format": "date"}, '"2023-02-29"', ["/: '2023-02-29' is not a 'date'"]),
    ({"type": "integer", "nullable": True}, "null", []),
    ({"type": "object", "properties": {"nullable": {"type": "boolean"}}}, '{"nullable":1}',
     ["/nullable: 1 is not of type 'boolean'"]),
    (ARRAY, "[1,2", ["the answer is not complete JSON (Expecting ',' delimiter at character 4); raise max_tokens"]),
])
def test_violations_name_where(schema: dict[str, Any], text: str, violations: list[str]) -> None:
    assert SchemaCheck(schema, frozenset()).violations(text) == violations


def test_the_report_says_what_was_checked_after_generation() -> None:
    check = SchemaCheck(ARRAY, frozenset({"uniqueItems"}))
    assert check.report("[1,2]") == {"valid": True, "checked_after_generation": ["uniqueItems"], "violations": []}
    assert check.report("[2,2]") == {"valid": False, "checked_after_generation": ["uniqueItems"],
                                     "violations": ["/: [2, 2] has non-unique elements"]}


def test_nothing_to_say_when_the_grammar_enforced_it_all_and_it_holds() -> None:
    check = SchemaCheck({"type": "integer"}, frozenset())
    assert check.report("3") is None
    assert check.report('"x"') == {"valid": False, "checked_after_generation": [],
                                   "violations": ["/: 'x' is not of type 'integer'"]}
