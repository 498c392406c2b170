"""A SQLite file of the state folder, opened the one safe way for every store that keeps one:

- WAL, and every change in a transaction, so a crash leaves each change whole or not at all.
- A schema version in `PRAGMA user_version`: a file from a newer pier is refused, never rewritten.
- A damaged file (not a database, truncated, failing SQLite's quick check) is refused with `StateDamaged`,
  whose message names the file and the ways out (`pier state restore`, or moving the file aside); pier never
  starts over with an empty database in its place. A new file is made whole before it takes the name.
- One row that no longer reads as what it holds is a `BadRow` (`rows.py`): only that row is unreadable, with why.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pier.state_folder.errors import StateDamaged, StateTooNew
from pier.state_folder.layout import FILE_MODE, SIDE_FILES, not_a_file, private_dir, sync_dir
from pier.state_folder.rows import Rows


@dataclass(frozen=True)
class Schema:
    """What one SQLite file of the state folder holds, for `open_database`, backups and `pier state check`."""

    version: int  # kept in PRAGMA user_version; a newer file is refused
    statements: tuple[str, ...]  # CREATE ... IF NOT EXISTS: run on a new file, and on one of an older version
    tables: tuple[str, ...]  # the tables a file of this version must have
    without: str  # what starting without the file means, for the advice on a damaged one
    rows: tuple[Rows[Any], ...] = ()  # every kind of row, as pier reads it (the check behind restore)
    tallies: tuple[tuple[str, str], ...] = ()  # (count's key, table) of tables only counted (metrics)


def open_database(path: Path, schema: Schema) -> sqlite3.Connection:
    """The database at `path`, checked, versioned and with every table; a new one when there is no file.
    Raises StateDamaged or StateTooNew instead of touching a file it cannot read."""
    private_dir(path.parent)
    if (problem := not_a_file(path)) is not None:
        raise StateDamaged(path, problem, schema.without)
    if not path.exists():
        orphans = [s for s in SIDE_FILES if Path(f"{path}{s}").is_file() and Path(f"{path}{s}").stat().st_size]
        if "-wal" in orphans:
            raise StateDamaged(path, f"the file is missing but its write-ahead log {path}-wal is there",
                               schema.without)
        _create(path, schema)
    elif path.stat().st_size == 0:
        raise StateDamaged(path, "the file is empty (0 bytes): it was truncated", schema.without)
    for suffix in ("", *SIDE_FILES):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", FILE_MODE)
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)
    except sqlite3.DatabaseError as error:
        raise StateDamaged(path, f"SQLite says {error}", schema.without) from None
    try:
        _prepare(db, path, schema)
    except sqlite3.DatabaseError as error:
        db.close()
        raise StateDamaged(path, f"SQLite says {error}", schema.without) from None
    except BaseException:
        db.close()
        raise
    return db


def _prepare(db: sqlite3.Connection, path: Path, schema: Schema) -> None:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > schema.version:
        raise StateTooNew(
            f"{path} was written by a newer pier (state schema {version}; this pier reads up to {schema.version}) "
            "and is left as it is: run that pier (or a newer one), or use another --state-dir."
        )
    problems = [row[0] for row in db.execute("PRAGMA quick_check(5)").fetchall()]
    if problems != ["ok"]:
        raise StateDamaged(path, "SQLite's quick check found " + "; ".join(str(p) for p in problems), schema.without)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    if version < schema.version:  # 0: a file from before versions were kept; there are no older schemas yet
        _make_tables(db, schema)
        return
    missing = missing_tables(db, schema)
    if missing:
        raise StateDamaged(path, f"its table(s) {', '.join(missing)} are gone", schema.without)


def missing_tables(db: sqlite3.Connection, schema: Schema) -> list[str]:
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return sorted(set(schema.tables) - present)


def _make_tables(db: sqlite3.Connection, schema: Schema) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in schema.statements:
            db.execute(statement)
        db.execute(f"PRAGMA user_version = {schema.version}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _create(path: Path, schema: Schema) -> None:
    """A new, empty file, made whole under a temporary name first: a crash while it is made leaves no
    half-made file under the real name (an empty or partial file there is damage, and is refused)."""
    fresh = path.with_name(f".{path.name}.new")
    for suffix in ("", *SIDE_FILES):
        Path(f"{fresh}{suffix}").unlink(missing_ok=True)
    os.close(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
    db = sqlite3.connect(fresh, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        _make_tables(db, schema)
    finally:
        db.close()  # the last connection checkpoints the log into the file and removes it
    os.replace(fresh, path)
    sync_dir(path.parent)
