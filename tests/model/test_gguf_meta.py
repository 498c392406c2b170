"""A GGUF's header read without llama.cpp: a file cut short anywhere is named as truncated, never a struct error
or llama.cpp's bare refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.model.gguf_meta import GgufFormatError, read_metadata, truncation


def cut(tiny_gguf: Path, folder: Path, keep: int) -> Path:
    data = tiny_gguf.read_bytes()
    out = folder / "cut.gguf"
    out.write_bytes(data[:keep] if keep >= 0 else data[:len(data) + keep])
    return out


def test_a_whole_file_is_not_truncated(tiny_gguf: Path) -> None:
    assert truncation(tiny_gguf) is None


@pytest.mark.parametrize("keep", [-1, -4096, "half"])
def test_a_file_cut_in_its_tensors_is_truncated(tiny_gguf: Path, tmp_path: Path, keep: int | str) -> None:
    size = tiny_gguf.stat().st_size
    keep = size // 2 if keep == "half" else int(keep)
    problem = truncation(cut(tiny_gguf, tmp_path, keep))
    assert problem is not None and "cut.gguf is truncated" in problem and f"need {size} bytes" in problem


@pytest.mark.parametrize("keep", [100, 30, 8])
def test_a_file_cut_in_its_header_says_so(tiny_gguf: Path, tmp_path: Path, keep: int) -> None:
    with pytest.raises(GgufFormatError, match="truncated"):
        truncation(cut(tiny_gguf, tmp_path, keep))
    with pytest.raises(GgufFormatError, match="truncated"):
        read_metadata(cut(tiny_gguf, tmp_path, keep), ["no.such.key"])
