"""Reading single-token words from a tokenizer's pieces."""

from __future__ import annotations

import pytest

from pier.bench.vocabulary import piece_words, single_token_words


@pytest.mark.parametrize(("words", "pieces", "expected"), [
    # llama-server's pieces of "a the cat": every word one token
    (["a", "the", "cat"], [b"a", b" the", b" cat"], ["the", "cat"]),
    # SentencePiece writes a space before the first word too
    (["a", "the", "cat"], [b" a", b" the", b" cat"], ["the", "cat"]),
    # " ca" + "t": two tokens
    (["a", "the", "cat"], [b" a", b" the", b" ca", b"t"], ["the"]),
    # a piece across the space: " the cat" is one token, neither word on its own
    (["a", "the", "cat"], [b" a", b" the cat"], []),
    # a multi-byte word, whole and in bytes
    (["a", "café", "naïve"], [b" a", " café".encode(), b" na", b"\xc3", b"\xafve"], ["café"]),
    # pieces that do not spell the text: nothing is trusted
    (["a", "the"], [b" a", b" then"], []),
    (["a", "the"], [], []),
])
def test_single_token_words(words: list[str], pieces: list[bytes], expected: list[str]) -> None:
    assert single_token_words(words, pieces) == expected


def test_piece_words_are_a_space_and_letters() -> None:
    pieces = [b" a", b" th", b"e", b" th", b" 42", b" x-", b",", b" \xc3", b" Zed"]
    assert piece_words(pieces) == ["a", "th", "Zed"]
