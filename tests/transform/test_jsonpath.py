from __future__ import annotations

from typing import Any

import pytest

from pier.transform.jsonpath import JsonPathError, parse

RECORD = {"id": 7, "features": [1, 2, 3, 4], "meta": {"lang": "en", "tags": ["a", "b"]}, "SageMakerOutput": [0.5]}


@pytest.mark.parametrize(("path", "value", "picked"), [
    ("$", RECORD, RECORD),
    ("$.id", RECORD, 7),
    ("$['id']", RECORD, 7),
    ('$["meta"]["lang"]', RECORD, "en"),
    ("$.meta.tags[1]", RECORD, "b"),
    ("$.features[-1]", RECORD, 4),
    ("$.features[1:]", RECORD, [2, 3, 4]),
    ("$.features[:2]", RECORD, [1, 2]),
    ("$.features[0,2]", RECORD, [1, 3]),
    ("$[1:]", [9, 8, 7], [8, 7]),
    ("$[0]", [9, 8, 7], 9),
    ("$['id','SageMakerOutput']", RECORD, {"id": 7, "SageMakerOutput": [0.5]}),
    ("$.meta.*", RECORD, ["en", ["a", "b"]]),
    ("$[*]", [1, 2], [1, 2]),
])
def test_picks(path: str, value: Any, picked: Any) -> None:
    assert parse(path).select(value) == picked


@pytest.mark.parametrize(("path", "words"), [
    ("id", "must start with '$'"),
    ("$..id", "up to '$'"),
    ("$[a]", "not an index, a slice or quoted names"),
    ("$.features(1)", "up to '$.features'"),
])
def test_outside_the_subset(path: str, words: str) -> None:
    with pytest.raises(JsonPathError, match=words.replace("$", r"\$").replace("(", r"\(").replace("[", r"\[")):
        parse(path)


@pytest.mark.parametrize(("path", "value", "words"), [
    ("$.missing", RECORD, "no member 'missing'"),
    ("$.features[9]", RECORD, r"no item \[9\]"),
    ("$.id[1:]", RECORD, "picks items of an array"),
    ("$['a','b']", [1], "picks members of an object"),
])
def test_records_that_lack_the_path(path: str, value: Any, words: str) -> None:
    with pytest.raises(JsonPathError, match=words):
        parse(path).select(value)
