"""A captured exchange as SageMaker writes it: encodings by content type, sides by capture mode, the path."""

from __future__ import annotations

import base64
import calendar

import pytest

from pier.capture.captured import Captured, ContentTypes, Side, file_name, folder, line

TYPES = ContentTypes.of(csv=["text/csv"], json=["application/json", "application/jsonlines"])
WHEN = calendar.timegm((2024, 5, 1, 13, 7, 9)) + 0.042


@pytest.mark.parametrize(("content_type", "data", "encoding", "written"), [
    ("application/json", b'{"a": 1}', "JSON", '{"a": 1}'),
    ("Application/JSON; charset=utf-8", b'{"a": 1}', "JSON", '{"a": 1}'),  # parameters and case do not matter
    ("text/csv", b"1,2,3", "CSV", "1,2,3"),
    ("text/event-stream", b"data: x\n\n", "BASE64", base64.b64encode(b"data: x\n\n").decode()),
    ("application/json", b"\xff\xfe", "BASE64", base64.b64encode(b"\xff\xfe").decode()),  # not UTF-8: kept as bytes
])
def test_each_side_is_encoded_as_its_content_type_says(content_type: str, data: bytes, encoding: str,
                                                       written: str) -> None:
    captured = Captured("e", "v", "id", WHEN, Side(data, content_type), None)
    assert line(captured, TYPES)["captureData"] == {"endpointInput": {
        "observedContentType": content_type, "mode": "INPUT", "data": written, "encoding": encoding}}


def test_no_capture_content_type_header_means_base64() -> None:
    captured = Captured("e", "v", "id", WHEN, Side(b"{}", "application/json"), None)
    assert line(captured, ContentTypes())["captureData"]["endpointInput"]["encoding"] == "BASE64"


def test_a_whole_record() -> None:
    captured = Captured("e", "v", "request-1", WHEN, Side(b"1,2", "text/csv"), Side(b"0.5", "text/csv"), "mine")
    assert line(captured, TYPES) == {
        "captureData": {
            "endpointInput": {"observedContentType": "text/csv", "mode": "INPUT", "data": "1,2", "encoding": "CSV"},
            "endpointOutput": {"observedContentType": "text/csv", "mode": "OUTPUT", "data": "0.5", "encoding": "CSV"},
        },
        "eventMetadata": {"eventId": "request-1", "inferenceTime": "2024-05-01T13:07:09Z", "inferenceId": "mine"},
        "eventVersion": "0",
    }


def test_files_go_under_the_endpoint_variant_and_hour() -> None:
    assert folder("my-endpoint", "AllTraffic", WHEN) == "my-endpoint/AllTraffic/2024/05/01/13"
    assert file_name(WHEN, "abc") == "07-09-042-abc.jsonl"
