import pytest

from pier.engine.detok import TextStream, first_stop, partial_stop_suffix


def feed(stream: TextStream, pieces: list[bytes]) -> tuple[list[str], str | None]:
    out, stop = [], None
    for piece in pieces:
        delta = stream.push(piece)
        out.append(delta.text)
        if delta.stop:
            stop = delta.stop
            break
    return out, stop


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        ([b"h", b"i"], ["h", "i"]),
        (["é".encode()[:1], "é".encode()[1:]], ["", "é"]),  # a 2-byte character split over two tokens
        ([b"\xe4", b"\xb8", b"\xad!"], ["", "", "中!"]),  # a 3-byte one over three
        ([b"a\xe2\x82", b"\xac"], ["a", "€"]),
        ([b"\xf0\x9f", b"\x98\x80"], ["", "😀"]),
    ],
)
def test_multibyte_characters_are_emitted_whole(pieces: list[bytes], expected: list[str]) -> None:
    out, _ = feed(TextStream(), pieces)
    assert out == expected


def test_incomplete_character_at_the_end_is_flushed_as_replacement() -> None:
    stream = TextStream()
    assert stream.push(b"ok\xe4\xb8").text == "ok"
    assert stream.flush() == "\ufffd"


@pytest.mark.parametrize(
    ("pieces", "stops", "emitted", "stop"),
    [
        ([b"Hello", b" wor", b"ld"], ["world"], "Hello ", "world"),  # never any part of the stop string
        ([b"a##", b"#b"], ["###"], "a", "###"),
        ([b"x<", b"/s", b"y"], ["</s>"], "x</sy", None),  # a false start is released once disproved
        ([b"one. two"], [". ", "two"], "one", ". "),  # the earliest stop wins
        ([b"abc"], [], "abc", None),
    ],
)
def test_stop_strings(pieces: list[bytes], stops: list[str], emitted: str, stop: str | None) -> None:
    stream = TextStream(stops)
    out, found = feed(stream, pieces)
    assert "".join(out) + ("" if found else stream.flush()) == emitted
    assert found == stop


@pytest.mark.parametrize(
    ("text", "stops", "expected"),
    [("abc", ["cd"], 1), ("abc", ["bcd"], 2), ("abc", ["xyz"], 0), ("abc", ["abc"], 0), ("", ["a"], 0)],
)
def test_partial_stop_suffix(text: str, stops: list[str], expected: int) -> None:
    assert partial_stop_suffix(text, stops, max(map(len, stops))) == expected


def test_first_stop_picks_the_earliest() -> None:
    assert first_stop("a b c", ["c", "b"]) == (2, "b")
    assert first_stop("abc", ["z"]) is None
