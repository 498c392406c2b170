"""An input object as records and the requests they go in (pure): SplitType, BatchStrategy, MaxPayloadInMB and
AssembleWith as SageMaker applies them.

A *unit* is what one request to a copy carries: one record (SingleRecord) or consecutive records up to the
payload limit (MultiRecord). Units follow from the object's bytes and the job's settings alone, so a job resumed
after a restart cuts the same object into the same units and skips the ones already answered."""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass

MIB = 1024 * 1024
MAX_DECOMPRESSED = 1024 * MIB  # an object's bytes once gunzipped


class RecordError(ValueError):
    """An object that cannot be cut as the job asks: the job fails with this message."""


@dataclass(frozen=True)
class Unit:
    index: int  # its place in the object's output
    records: tuple[bytes, ...]  # the records it carries, in input order

    @property
    def body(self) -> bytes:
        """A mini-batch is its records, one a line, as SageMaker sends it."""
        return b"\n".join(self.records)


def decompress(data: bytes, compression: str, limit: int = MAX_DECOMPRESSED) -> bytes:
    """The object's bytes, gunzipped for CompressionType Gzip, at most `limit` of them: an object is held whole in
    the gateway's memory, and a small gzip can expand to gigabytes (a gzip bomb would take the gateway down)."""
    if compression != "Gzip":
        return data
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
            out = unzipped.read(limit + 1)
    except (OSError, EOFError) as error:
        raise RecordError(f"the object is not gzip ({error}); set CompressionType None for plain objects") from None
    if len(out) > limit:
        # The exception keeps this frame, and a failed job keeps its exception in reference cycles (its tasks)
        # until a full collection: the refused gigabyte stayed in the gateway with it.
        del out
        raise RecordError(f"the object decompresses to more than {limit // MIB} MiB, more than pier holds at once: "
                          "split it into smaller objects")
    return out


def split(data: bytes, split_type: str) -> list[bytes]:
    """Line: one record a line (blank lines are no records); None: the whole object is one record."""
    if split_type == "Line":
        return [line for line in data.splitlines() if line.strip()]
    return [data] if data else []


def units(records: list[bytes], strategy: str, max_payload_mb: int) -> list[Unit]:
    """The requests for `records`. MaxPayloadInMB 0 means no limit (SageMaker's streaming setting)."""
    limit = max_payload_mb * MIB if max_payload_mb else None
    for number, record in enumerate(records, 1):
        if limit is not None and len(record) > limit:
            raise RecordError(f"record {number} is {len(record)} bytes, more than MaxPayloadInMB "
                              f"({max_payload_mb} MB): raise MaxPayloadInMB or split the input smaller")
    if strategy != "MultiRecord":
        return [Unit(i, (record,)) for i, record in enumerate(records)]
    found: list[Unit] = []
    batch: list[bytes] = []
    size = 0
    for record in records:
        added = len(record) + (1 if batch else 0)
        if batch and limit is not None and size + added > limit:
            found.append(Unit(len(found), tuple(batch)))
            batch, size, added = [], 0, len(record)
        batch.append(record)
        size += added
    if batch:
        found.append(Unit(len(found), tuple(batch)))
    return found


def assemble(outputs: list[bytes], assemble_with: str) -> bytes:
    """The output object: Line ends every unit's output with a newline (unless it has one); None joins them."""
    if assemble_with != "Line":
        return b"".join(outputs)
    return b"".join(out if out.endswith(b"\n") else out + b"\n" for out in outputs)


def output_name(relative: str) -> str:
    """SageMaker names the output of `<name>` `<name>.out`."""
    return relative + ".out"
