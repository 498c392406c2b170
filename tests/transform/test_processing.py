from __future__ import annotations

import json

import pytest

from pier.transform.processing import Processing, ProcessingError

RECORD = b'{"id":1,"inputs":"hi","parameters":{"max_new_tokens":2}}'
OUTPUT = b'[{"generated_text":"there"}]'


def test_nothing_to_do_passes_bytes_through() -> None:
    idle = Processing.of(None, "application/jsonlines")
    assert idle.prepare(b"not json") == b"not json"
    assert idle.finish((b"not json",), b"raw answer") == b"raw answer"


@pytest.mark.parametrize(("given", "sent", "written"), [
    ({"InputFilter": "$.inputs"}, '"hi"', [{"generated_text": "there"}]),
    ({"JoinSource": "Input"}, None, {"id": 1, "inputs": "hi", "parameters": {"max_new_tokens": 2},
                                     "SageMakerOutput": [{"generated_text": "there"}]}),
    ({"InputFilter": "$['inputs','parameters']", "JoinSource": "Input", "OutputFilter": "$['id','SageMakerOutput']"},
     '{"inputs":"hi","parameters":{"max_new_tokens":2}}', {"id": 1, "SageMakerOutput": [{"generated_text": "there"}]}),
    ({"OutputFilter": "$[0].generated_text"}, None, "there"),
])
def test_json_records(given: dict[str, str], sent: str | None, written: object) -> None:
    processing = Processing.of(given, "application/json")
    assert processing.prepare(RECORD) == (sent.encode() if sent else RECORD)
    assert json.loads(processing.finish((RECORD,), OUTPUT)) == written


def test_an_array_record_gets_its_output_appended() -> None:
    processing = Processing.of({"JoinSource": "Input"}, "application/json")
    assert json.loads(processing.finish((b"[1,2]",), b"0.5")) == [1, 2, 0.5]


def test_csv_records_are_arrays_of_fields() -> None:
    processing = Processing.of({"InputFilter": "$[1:]", "JoinSource": "Input", "OutputFilter": "$[0,-1]"}, "text/csv")
    assert processing.prepare(b"id7,1.5,2.5") == b"1.5,2.5"
    assert processing.finish((b"id7,1.5,2.5",), b"0.9") == b"id7,0.9"


def test_a_mini_batch_is_joined_line_by_line() -> None:
    processing = Processing.of({"JoinSource": "Input"}, "application/jsonlines")
    joined = processing.finish((b'{"a":1}', b'{"a":2}'), b"10\n20\n")
    assert [json.loads(line) for line in joined.splitlines()] == [{"a": 1, "SageMakerOutput": 10},
                                                                   {"a": 2, "SageMakerOutput": 20}]
    with pytest.raises(ProcessingError, match="answered 1 lines for a mini-batch of 2"):
        processing.finish((b'{"a":1}', b'{"a":2}'), b"10\n")


@pytest.mark.parametrize(("given", "record", "words"), [
    ({"InputFilter": "$.missing"}, RECORD, "no member 'missing'"),
    ({"InputFilter": "$.id"}, b"plain text", "is not JSON"),
])
def test_records_the_filters_do_not_fit(given: dict[str, str], record: bytes, words: str) -> None:
    with pytest.raises(ProcessingError, match=words):
        Processing.of(given, "application/json").prepare(record)


def test_join_needs_an_object_or_array() -> None:
    with pytest.raises(ProcessingError, match="JoinSource Input joins a JSON object or array"):
        Processing.of({"JoinSource": "Input"}, "application/json").finish((b'"text"',), b"1")
