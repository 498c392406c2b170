from __future__ import annotations

import pytest

from pier.channel.kv_held import decode_held, encode_held

A, B, C = "a" * 24, "b" * 24, "0123456789abcdef01234567"


@pytest.mark.parametrize(("blocks", "limit", "expected"), [
    ((), 4, ""),
    ((A,), 4, A),
    ((A, B, C), 4, f"{A},{B},{C}"),
    ((A, B, A), 4, f"{A},{B}"),  # a block twice is sent once, at its most recent place
    ((A, B, C), 2, f"{A},{B}"),  # the most recently used are kept
])
def test_encode_held(blocks: tuple[str, ...], limit: int, expected: str) -> None:
    assert encode_held(blocks, limit=limit) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (None, None),
    ("", ()),
    (A, (A,)),
    (f"{A}, {B}", (A, B)),
    (f"{A},nothex{'x' * 18},{B}", (A, B)),
    (f"{A},{A[:-1]},{B.upper()}", (A,)),  # wrong length and upper case are not pier's hashes
])
def test_decode_held(value: str | None, expected: tuple[str, ...] | None) -> None:
    assert decode_held(value) == expected


def test_round_trip() -> None:
    assert decode_held(encode_held((C, A, B))) == (C, A, B)
