"""The toolkit's default decoders and encoders (JSON, CSV, NPY), table-driven."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

from pier.server.byoc import codecs
from pier.server.byoc.errors import HandlerError


def npy(array: Any, allow_pickle: bool = False) -> bytes:
    stream = io.BytesIO()
    np.save(stream, array, allow_pickle=allow_pickle)
    return stream.getvalue()


@pytest.mark.parametrize(
    ("content_type", "body", "expected"),
    [
        ("application/json", b"[1, 2, 3]", np.array([1, 2, 3])),
        ("application/json", "[[1.5, 2], [3, 4]]", np.array([[1.5, 2.0], [3.0, 4.0]])),
        ("application/json", b"7", np.array(7)),
        ("application/json", b'{"prompt": "hi"}', {"prompt": "hi"}),
        ("application/json", b'"just text"', "just text"),
        ("application/json", b"[[1], [1, 2]]", [[1], [1, 2]]),
        ("application/json; charset=utf-8", b"[1]", np.array([1])),
        ("Application/JSON", b"[1]", np.array([1])),
        ("text/csv", "1,2\n3,4", np.array([[1, 2], [3, 4]])),
        ("text/csv", b"1.5,2.5", np.array([1.5, 2.5])),
        ("application/x-npy", npy(np.arange(4.0)), np.arange(4.0)),
    ],
)
def test_decode(content_type: str, body: bytes | str, expected: Any) -> None:
    decoded = codecs.decode(body, content_type)
    if isinstance(expected, np.ndarray):
        np.testing.assert_array_equal(decoded, expected)
        assert decoded.dtype == expected.dtype
    else:
        assert decoded == expected


@pytest.mark.parametrize(
    ("content_type", "body", "status", "says"),
    [
        ("text/plain", b"hello", 415, "application/json, text/csv, application/x-npy"),
        ("", b"[1]", 415, "(none)"),
        ("application/octet-stream", b"\x00", 415, "define input_fn"),
        ("application/json", b"{not json", 400, "not valid application/json"),
        ("application/json", b"\xff\xfe", 400, "not valid application/json"),
        ("text/csv", "1,2\n3", 400, "not valid text/csv"),
        ("application/x-npy", b"not an npy file", 400, "not valid application/x-npy"),
        # A pickle in a request body would run the sender's code: refused, unlike the toolkit.
        ("application/x-npy", npy(np.array([{}], dtype=object), allow_pickle=True), 400, "allow_pickle"),
    ],
)
def test_decode_refuses(content_type: str, body: bytes | str, status: int, says: str) -> None:
    with pytest.raises(HandlerError) as caught:
        codecs.decode(body, content_type)
    assert caught.value.status == status
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("prediction", "accept", "body", "content_type"),
    [
        ({"a": [1, 2]}, "application/json", b'{"a": [1, 2]}', "application/json"),
        (np.array([1, 2]), "*/*", b"[1, 2]", "application/json"),
        ([1, 2], "", b"[1, 2]", "application/json"),
        ({"x": np.float32(1.5), "y": np.arange(2)}, "application/json", b'{"x": 1.5, "y": [0, 1]}',
         "application/json"),
        (np.array([[1, 2], [3, 4]]), "text/csv", b"1,2\n3,4\n", "text/csv"),
        (np.array([1, 2]), "text/csv", b"1\n2\n", "text/csv"),  # the toolkit writes a vector as a column
        (5, "text/csv", b"5\n", "text/csv"),
        ([1, 2], "text/html, text/csv;q=0.5", b"1\n2\n", "text/csv"),
        ([1], "text/html, */*", b"[1]", "application/json"),
        ([1], "application/json; q=0.9", b"[1]", "application/json"),
    ],
)
def test_encode(prediction: Any, accept: str, body: bytes, content_type: str) -> None:
    assert codecs.encode(prediction, accept) == (body, content_type)


def test_encode_npy_round_trips() -> None:
    body, content_type = codecs.encode(np.arange(6.0).reshape(2, 3), "application/x-npy")
    assert content_type == "application/x-npy"
    np.testing.assert_array_equal(np.load(io.BytesIO(body)), np.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize(
    ("prediction", "accept", "says"),
    [
        ([1], "text/html", "application/json, text/csv, application/x-npy"),
        ([1], "image/png, text/plain", "Accept image/png, text/plain is not supported"),
        ({1, 2}, "application/json", "cannot be written as application/json"),
        ({"a": 1}, "application/x-npy", "cannot be written as application/x-npy"),
    ],
)
def test_encode_refuses_with_406(prediction: Any, accept: str, says: str) -> None:
    with pytest.raises(HandlerError) as caught:
        codecs.encode(prediction, accept)
    assert caught.value.status == 406
    assert says in caught.value.message
