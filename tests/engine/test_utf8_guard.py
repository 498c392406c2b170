"""The tokens a grammar-constrained sequence may not sample on the fake runner's vocabulary (bytes 3-258)."""

from __future__ import annotations

import pytest

from pier.engine.fake import FakeRunner
from pier.engine.utf8_guard import Utf8Guard


def byte(b: int) -> int:
    return FakeRunner.FIRST_BYTE + b


GUARD = Utf8Guard(FakeRunner())


@pytest.mark.parametrize(("pending", "refused", "allowed"), [
    (b"", [0, 1, byte(0xC0), byte(0xC1), byte(0xF5), byte(0xFF)], [FakeRunner.EOS, byte(0x41), byte(0xE0), byte(0x80)]),
    (b"\xe0", [byte(0x80), byte(0x9F)], [byte(0xA0), byte(0xBF)]),  # no overlong three-byte form
    (b"\xed", [byte(0xA0), byte(0xBF)], [byte(0x80), byte(0x9F)]),  # no surrogates
    (b"\xf0", [byte(0x80), byte(0x8F)], [byte(0x90), byte(0xBF)]),  # no overlong four-byte form
    (b"\xf4", [byte(0x90), byte(0xBF)], [byte(0x80), byte(0x8F)]),  # nothing past U+10FFFF
    (b"\xe4", [byte(0xC0)], [byte(0x80), byte(0xBF)]),
])
def test_refused_tokens(pending: bytes, refused: list[int], allowed: list[int]) -> None:
    out = set(GUARD.refused(pending).tolist())
    assert set(refused) <= out
    assert not set(allowed) & out
