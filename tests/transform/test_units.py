from __future__ import annotations

import gzip
import tracemalloc

import pytest

from pier.transform.units import MIB, RecordError, Unit, assemble, decompress, output_name, split, units


@pytest.mark.parametrize(("data", "split_type", "records"), [
    (b'{"a":1}\n{"a":2}\n', "Line", [b'{"a":1}', b'{"a":2}']),
    (b"x\r\n\r\n  \ny", "Line", [b"x", b"y"]),  # blank lines are no records
    (b"x\ny\n", "None", [b"x\ny\n"]),
    (b"", "None", []),
    (b"", "Line", []),
])
def test_split(data: bytes, split_type: str, records: list[bytes]) -> None:
    assert split(data, split_type) == records


def test_single_record_units_keep_input_order() -> None:
    assert units([b"a", b"b", b"c"], "SingleRecord", 6) == [Unit(0, (b"a",)), Unit(1, (b"b",)), Unit(2, (b"c",))]


@pytest.mark.parametrize(("sizes", "payload_mb", "batches"), [
    ([MIB // 2, MIB // 2 - 1, 10], 1, [2, 1]),  # two halves and their newline fit one MiB exactly
    ([MIB // 2, MIB // 2], 1, [1, 1]),  # the newline between them does not fit
    ([10] * 5, 0, [5]),  # 0: no limit
])
def test_multi_record_units_pack_to_the_payload(sizes: list[int], payload_mb: int, batches: list[int]) -> None:
    records = [bytes([65 + i]) * size for i, size in enumerate(sizes)]
    found = units(records, "MultiRecord", payload_mb)
    assert [len(u.records) for u in found] == batches
    assert b"\n".join(u.body for u in found) == b"\n".join(records)
    assert all(len(u.body) <= (payload_mb * MIB or len(u.body)) for u in found)


def test_a_record_over_the_payload_fails_with_the_fix() -> None:
    with pytest.raises(RecordError, match=r"record 2 is .* raise MaxPayloadInMB"):
        units([b"a", b"b" * (MIB + 1)], "SingleRecord", 1)


def test_gzip() -> None:
    assert decompress(gzip.compress(b"abc"), "Gzip") == b"abc"
    assert decompress(b"abc", "None") == b"abc"
    with pytest.raises(RecordError, match="set CompressionType None"):
        decompress(b"abc", "Gzip")


@pytest.mark.parametrize(("outputs", "assemble_with", "whole"), [
    ([b"1", b"2\n", b"3"], "Line", b"1\n2\n3\n"),
    ([b"1", b"2"], "None", b"12"),
])
def test_assemble(outputs: list[bytes], assemble_with: str, whole: bytes) -> None:
    assert assemble(outputs, assemble_with) == whole


def test_output_name() -> None:
    assert output_name("dataset01/data.csv") == "dataset01/data.csv.out"


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    """A small object that expands past the limit is refused without expanding it whole; several gzip members
    (concatenated files) count together; an object at the limit is read."""
    bomb = gzip.compress(bytes(4 * MIB))  # 4 KiB of gzip
    with pytest.raises(RecordError, match="decompresses to more than 1 MiB"):
        decompress(bomb, "Gzip", limit=MIB)
    assert decompress(gzip.compress(b"a\n") + gzip.compress(b"b\n"), "Gzip") == b"a\nb\n"
    with pytest.raises(RecordError, match="more than"):
        decompress(gzip.compress(bytes(MIB)) * 2, "Gzip", limit=MIB)
    assert len(decompress(gzip.compress(bytes(MIB)), "Gzip", limit=MIB)) == MIB


def test_a_refused_gzip_bomb_keeps_nothing_of_its_expansion() -> None:
    """After a refused bomb the gateway kept ~1.1 GiB: the exception held the frame that held the expanded bytes,
    and a failed job's tasks hold their exception in reference cycles until a full collection. The exception
    (kept here, as those cycles keep it) holds nothing of the expansion."""
    bomb = gzip.compress(bytes(65 * MIB), compresslevel=1)
    tracemalloc.start()
    try:
        with pytest.raises(RecordError, match="more than 64 MiB") as refused:
            decompress(bomb, "Gzip", limit=64 * MIB)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.__traceback__ is not None and held < MIB
