"""A GGUF's metadata, read straight from the file header: only the keys asked for, the rest skipped.

gguf-py's GGUFReader builds Python objects for every value of every array before answering, which takes half a
minute for a 262k-token vocabulary on a small CPU; serving needs a handful of keys once per load, so this reads
the key-value section with `struct` over a memory map and decodes only what is asked (GGUF v2 and v3).
"""

from __future__ import annotations

import mmap
import struct
from array import array
from collections.abc import Collection
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
# value type -> (struct format, size) for the fixed-size ones
_SCALARS = {0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4), 6: ("f", 4), 7: ("?", 1),
            10: ("Q", 8), 11: ("q", 8), 12: ("d", 8)}
_STRING, _ARRAY = 8, 9


class GgufFormatError(ValueError):
    """Not a GGUF file this reader understands (wrong magic, version 1, big-endian, truncated)."""


def read_metadata(path: str | Path, keys: Collection[str]) -> dict[str, Any]:
    """The values of `keys` present in the GGUF at `path`: str, int, float, bool, or a list of them (a string
    array is a list of bytes: token texts are not always valid UTF-8)."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return _Reader(data).metadata(set(keys))


def truncation(path: str | Path) -> str | None:
    """Why the GGUF at `path` is not whole (its tensors' data runs past the end of the file), or None. llama.cpp
    refuses such a file with a reason it only logs; a file cut short in its header raises GgufFormatError."""
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        needed = _Reader(data).data_end()
        if needed > len(data):
            return (f"{Path(path).name} is truncated: its tensors need {needed} bytes, the file has {len(data)}; "
                    "copy or download it again whole")
    return None


class _Reader:
    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.at = 0

    def metadata(self, wanted: set[str]) -> dict[str, Any]:
        _, n_kv = self._header()
        found: dict[str, Any] = {}
        for _ in range(n_kv):
            key = self._string().decode("utf-8", "replace")
            kind = self._scalar("I", 4)
            if key in wanted:
                found[key] = self._value(kind)
                if len(found) == len(wanted):
                    break
            else:
                self._skip(kind)
        return found

    def data_end(self) -> int:
        """Where the last tensor's data ends: the size of the whole file."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        n_tensors, n_kv = self._header()
        alignment = 32  # GGUF's default
        for _ in range(n_kv):
            key, kind = self._string(), self._scalar("I", 4)
            if key == b"general.alignment" and kind in _SCALARS:
                alignment = int(self._value(kind)) or 32
            else:
                self._skip(kind)
        end = 0
        for _ in range(n_tensors):
            self._string()  # its name
            dims = [self._scalar("Q", 8) for _ in range(self._scalar("I", 4))]
            kind, offset = self._scalar("I", 4), self._scalar("Q", 8)
            try:
                block, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
            except (ValueError, KeyError):
                raise GgufFormatError(f"unknown GGML tensor type {kind}") from None
            elements = 1
            for dim in dims:
                elements *= dim
            end = max(end, offset + elements // block * size)
        start = -(-self.at // alignment) * alignment  # the tensor data begins at the next aligned offset
        return start + end

    def _header(self) -> tuple[int, int]:
        """The counts of tensors and of key-value pairs, after the magic and version are checked."""
        if self.data[:4] != MAGIC:
            raise GgufFormatError("not a GGUF file (no GGUF magic): give a valid GGUF model file")
        self.at = 4
        version = self._scalar("I", 4)
        if version not in (2, 3):
            raise GgufFormatError(f"GGUF version {version} is not read here (only 2 and 3, little-endian)")
        return self._scalar("Q", 8), self._scalar("Q", 8)

    def _scalar(self, fmt: str, size: int) -> Any:

        try:
            (value,) = struct.unpack_from("<" + fmt, self.data, self.at)
        except struct.error:
            raise GgufFormatError("the GGUF header is truncated") from None
        self.at += size
        return value

    def _string(self) -> bytes:
        length = self._scalar("Q", 8)
        value = self.data[self.at:self.at + length]
        if len(value) != length:
            raise GgufFormatError("the GGUF header is truncated")
        self.at += length
        return value

    def _value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self._scalar(*_SCALARS[kind])
        if kind == _STRING:
            return self._string().decode("utf-8", "replace")
        if kind == _ARRAY:
            item, count = self._scalar("I", 4), self._scalar("Q", 8)
            if item == _STRING:
                return [self._string() for _ in range(count)]
            if item in _SCALARS:
                fmt, size = _SCALARS[item]
                values = array(fmt if fmt != "?" else "B")
                values.frombytes(self.data[self.at:self.at + count * size])
                self.at += count * size
                return values.tolist()
            return [self._value(item) for _ in range(count)]
        raise GgufFormatError(f"unknown GGUF value type {kind}")

    def _skip(self, kind: int) -> None:
        if kind in _SCALARS:
            self.at += _SCALARS[kind][1]
        elif kind == _STRING:
            self.at += 8 + self._peek_length()
        elif kind == _ARRAY:
            item, count = self._scalar("I", 4), self._scalar("Q", 8)
            if item in _SCALARS:
                self.at += count * _SCALARS[item][1]
            else:
                for _ in range(count):
                    self._skip(item)
        else:
            raise GgufFormatError(f"unknown GGUF value type {kind}")

    def _peek_length(self) -> int:
        try:
            (length,) = struct.unpack_from("<Q", self.data, self.at)
        except struct.error:
            raise GgufFormatError("the GGUF header is truncated") from None
        return int(length)
