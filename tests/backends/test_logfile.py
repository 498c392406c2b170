from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends import logfile
from pier.backends.logfile import rotate, tail


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        ("", 5, ""),
        ("one\n", 0, ""),
        ("one\ntwo\nthree\n", 2, "two\nthree\n"),
        ("one\ntwo\nthree", 2, "two\nthree"),  # a last line still being written counts
        ("one\ntwo\n", 10, "one\ntwo\n"),
        ("caf\u00e9\n\u2603\n", 1, "\u2603\n"),
    ],
)
def test_tail(tmp_path: Path, text: str, lines: int, expected: str) -> None:
    path = tmp_path / "copy.log"
    path.write_text(text)
    assert tail(path, lines) == expected


def test_tail_reads_back_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logfile, "TAIL_CHUNK", 7)  # lines longer than a chunk, chunks cutting characters
    path = tmp_path / "copy.log"
    path.write_text("".join(f"line {i} \u00e9\u00e9\u00e9\u00e9\n" for i in range(100)))
    assert tail(path, 3) == "".join(f"line {i} \u00e9\u00e9\u00e9\u00e9\n" for i in (97, 98, 99))


def test_rotate_keeps_one_old_log(tmp_path: Path) -> None:
    path = tmp_path / "copy.log"
    rotate(path, max_bytes=10)  # nothing yet: nothing to do
    path.write_text("small")
    rotate(path, max_bytes=10)
    assert path.read_text() == "small"
    path.write_text("x" * 11)
    rotate(path, max_bytes=10)
    assert not path.exists() and (tmp_path / "copy.log.1").read_text() == "x" * 11
