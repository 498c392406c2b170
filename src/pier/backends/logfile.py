"""A copy's log: everything its process writes, kept across restarts, bounded, read from the end."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

MAX_LOG_BYTES = 16 * 1024 * 1024  # past this, the log moves to <name>.1 at the next start
TAIL_CHUNK = 64 * 1024


def rotate(path: Path, max_bytes: int = MAX_LOG_BYTES) -> None:
    """Keep one old log beside the current one, so a crash loop cannot fill the disk."""
    try:
        if path.stat().st_size > max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines, reading only as much of the file's end as they need."""
    if lines <= 0:
        return ""
    with path.open("rb") as log:
        end = log.seek(0, os.SEEK_END)
        data, start = b"", end
        while start > 0 and data.count(b"\n") <= lines:
            start = max(0, start - TAIL_CHUNK)
            log.seek(start)
            data = log.read(end - start)
    text = data.decode("utf-8", "replace")
    kept = text.splitlines(keepends=True)[-lines:]
    return "".join(kept)


def note(path: Path, line: str) -> None:
    """One of pier's own lines in a copy's log, between the process's, so the log tells the whole story."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with path.open("a") as out:
        out.write(f"==== pier {stamp}: {line} ====\n")
