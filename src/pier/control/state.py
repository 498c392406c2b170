"""The control plane's state in one SQLite file, so a restarted gateway brings back every resource.

One table per kind; a row is the record as JSON, keyed by name without regard to case (SageMaker names
are unique regardless of case). The file is written safely and never given up silently:

- WAL, and every change in a transaction (`State.transaction()`; a Table's writes open one of their own, and
  a caller may group several writes in one), so a crash leaves each change whole or not at all.
- A schema version in `PRAGMA user_version`: a file from a newer pier is refused, never rewritten.
- A damaged file (not a database, truncated, failing SQLite's quick check) is refused with `StateDamaged`,
  whose message names the file and the ways out (`pier state restore`, or moving the file aside); pier never
  starts over with an empty database in its place. A new file is made whole before it takes the name.
- One row whose JSON no longer reads as its record (a schema change, a hand edit) makes only that resource
  unreadable: `Table.all()` leaves it out, `Table.unreadable()` lists it with why, `Table.get()` raises
  `UnreadableRecord` for it, and `Table.delete()` still removes it.
- The folder is private (0700) and the files 0600: models' Environment blocks carry tokens.

Backups, restore and the checks behind `pier state` are in `backups.py`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

import pydantic

from pier.control.errors import ControlError
from pier.control.records import ComponentRecord, ConfigRecord, EndpointRecord, ModelRecord, Record
from pier.errors import PierError

log = logging.getLogger("pier.control")

R = TypeVar("R", bound=Record)

SCHEMA_VERSION = 1
STATE_FILE = "state.sqlite3"
BACKUPS = "backups"
SIDE_FILES = ("-wal", "-shm")  # SQLite's write-ahead log and its index, beside the database
DIR_MODE = 0o700
FILE_MODE = 0o600

# table name -> (record class, the resource as SageMaker's messages name it)
TABLES: dict[str, tuple[type[Record], str]] = {
    "models": (ModelRecord, "model"),
    "endpoint_configs": (ConfigRecord, "endpoint configuration"),
    "endpoints": (EndpointRecord, "endpoint"),
    "inference_components": (ComponentRecord, "inference component"),
}


class StateError(PierError):
    """The state file cannot be used as it is; the message says why and what to do."""

    code = "state_unusable"


class StateDamaged(StateError):
    """A file of the state folder pier cannot read: it is refused, never replaced by an empty one."""

    code = "state_damaged"

    def __init__(self, path: Path, problem: str, without: str = "no resources") -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"pier cannot use its state file {path}: {problem}.\n{damage_advice(path, without)}")


class StateTooNew(StateError, RuntimeError):
    code = "state_too_new"


@dataclass(frozen=True)
class BadRow:
    """A stored row that does not read as its record: what is still known about it, and why."""

    kind: str  # "model", "endpoint", ... as messages name it
    name: str
    created: float
    reason: str
    fields: dict[str, Any] = field(default_factory=dict)  # its JSON's top-level members, when it parsed at all

    def text(self, key: str, default: str = "") -> str:
        value = self.fields.get(key)
        return value if isinstance(value, str) else default

    def number(self, key: str, default: float) -> float:
        value = self.fields.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default

    @property
    def failure_reason(self) -> str:
        return (f"pier cannot read its stored record of this {self.kind}: {self.reason}. Delete the {self.kind} and "
                "create it again, or restore a backup of the state (pier state restore).")


@dataclass(frozen=True)
class Schema:
    """What one SQLite file of the state folder holds, for `open_database`, backups and `pier state check`."""

    version: int  # kept in PRAGMA user_version; a newer file is refused
    statements: tuple[str, ...]  # CREATE ... IF NOT EXISTS: run on a new file, and on one of an older version
    tables: tuple[str, ...]  # the tables a file of this version must have
    without: str  # what starting without the file means, for the advice on a damaged one
    rows: Callable[[sqlite3.Connection], RowsRead]  # every row read as pier reads it (the check behind restore)


@dataclass
class RowsRead:
    counts: dict[str, int] = field(default_factory=dict)  # table (or kind) -> rows that read
    bad: list[BadRow] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # "<kind> <name>" of every row, read or not (what a backup lacks)


class UnreadableRecord(ControlError):
    """The resource exists but its stored record cannot be read (see `BadRow`)."""

    code = "unreadable_record"

    def __init__(self, row: BadRow) -> None:
        super().__init__(f'{row.kind.capitalize()} "{row.name}": {row.failure_reason}')
        self.row = row


def backup_pattern(name: str) -> str:
    """The glob of the backups of the state file called `name`: state.sqlite3's are state-<UTC time>.sqlite3."""
    stem, dot, suffix = name.partition(".")
    return f"{stem}-*{dot}{suffix}"


def damage_advice(path: Path, without: str = "no resources") -> str:
    """The ways out of a damaged state file, with the commands to type; `without` is what starting without the
    file means."""
    folder = path.parent
    backups = sorted((folder / BACKUPS).glob(backup_pattern(path.name)), reverse=True)
    newest = f" (the newest is {backups[0].name})" if backups else ""
    restore = (f"  - restore the newest backup{newest}:  pier state restore --state-dir {folder}\n" if backups
               else f"  - (there is no backup of it under {folder / BACKUPS} to restore)\n")
    return (
        "pier does not start on it, and never replaces it with an empty one. Either\n"
        f"{restore}"
        f"  - or move the file aside and start with {without}:  mv {path} {path}.damaged\n"
        f"`pier state check --state-dir {folder}` shows what is wrong with it."
    )


def read_row(table: str, name: Any, created: Any, body: Any) -> Record | BadRow:
    """One stored row as its record, or as a BadRow saying why it is not one."""
    record_type, kind = TABLES[table]
    label = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    when = float(created) if isinstance(created, int | float) and not isinstance(created, bool) else 0.0
    raw = body.encode() if isinstance(body, str) else body
    if not isinstance(raw, bytes):
        return BadRow(kind, label, when, f"its stored body is {type(body).__name__}, not JSON")
    try:
        record = record_type.model_validate_json(raw)
    except pydantic.ValidationError as error:
        return BadRow(kind, label, when, _why(error), _fields(raw))
    if record.name.lower() != label.lower():
        return BadRow(kind, label, when, f"the stored record is named {record.name!r}, not {label!r}", _fields(raw))
    return record


def _why(error: pydantic.ValidationError) -> str:
    problems = error.errors(include_url=False)
    parts = []
    for problem in problems[:3]:
        where = ".".join(str(p) for p in problem["loc"]) or "the record"
        parts.append(f"{where}: {problem['msg']}")
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return "its stored JSON does not read as one (" + "; ".join(parts) + more + ")"


def _fields(raw: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Table(Generic[R]):
    def __init__(self, state: State, name: str) -> None:
        self._state = state
        self._name = name
        self._record, self.kind = TABLES[name]

    def get(self, name: str) -> R | None:
        """The record called `name` (in any case), None when there is none; `UnreadableRecord` when its row is
        there but does not read."""
        with self._state.cursor() as cursor:
            row = cursor.execute(self._select + " WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        read = read_row(self._name, *row)
        if isinstance(read, BadRow):
            raise UnreadableRecord(read)
        return read  # type: ignore[return-value]

    def insert(self, record: R) -> bool:
        """False when a record of that name (in any case) exists already."""
        with self._state.transaction() as db:
            cursor = db.execute(
                f"INSERT OR IGNORE INTO {self._name} (name, created, body) VALUES (?, ?, ?)",
                (record.name, record.created, record.model_dump_json()),
            )
            return cursor.rowcount == 1

    def put(self, record: R) -> None:
        with self._state.transaction() as db:
            db.execute(
                f"INSERT INTO {self._name} (name, created, body) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET body = excluded.body",
                (record.name, record.created, record.model_dump_json()),
            )

    def delete(self, name: str) -> bool:
        """Removes the row whether or not it reads."""
        with self._state.transaction() as db:
            return db.execute(f"DELETE FROM {self._name} WHERE name = ?", (name,)).rowcount == 1

    def all(self) -> list[R]:
        """Every record that reads, oldest first (see `unreadable()` for the rest)."""
        return self.scan()[0]

    def unreadable(self) -> list[BadRow]:
        return self.scan()[1]

    def scan(self) -> tuple[list[R], list[BadRow]]:
        """The records that read and the rows that do not, each oldest first."""
        with self._state.cursor() as cursor:
            rows = cursor.execute(self._select + " ORDER BY created, name").fetchall()
        good: list[R] = []
        bad: list[BadRow] = []
        for row in rows:
            read = read_row(self._name, *row)
            if isinstance(read, BadRow):
                bad.append(read)
            else:
                good.append(read)  # type: ignore[arg-type]
        return good, bad

    @property
    def _select(self) -> str:
        # The body as bytes: text that is not UTF-8 makes that one row unreadable, not the whole query.
        return f"SELECT CAST(name AS BLOB), created, CAST(body AS BLOB) FROM {self._name}"


def _state_rows(db: sqlite3.Connection) -> RowsRead:
    read = RowsRead()
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for table in TABLES:
        if table not in present:
            continue
        rows = db.execute(f"SELECT CAST(name AS BLOB), created, CAST(body AS BLOB) FROM {table} "
                          "ORDER BY created, name").fetchall()
        records = [read_row(table, *row) for row in rows]
        read.bad += [r for r in records if isinstance(r, BadRow)]
        read.counts[table] = sum(1 for r in records if not isinstance(r, BadRow))
        read.names |= {f"{TABLES[table][1]} {r.name}" for r in records}
    return read


STATE_SCHEMA = Schema(
    SCHEMA_VERSION,
    tuple(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY COLLATE NOCASE, created REAL NOT NULL, "
          "body TEXT NOT NULL)" for table in TABLES),
    tuple(TABLES), "no resources", _state_rows)


class State:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0  # transactions open on this connection (nested ones are savepoints)
        self._db = open_database(path, STATE_SCHEMA)
        self.models: Table[ModelRecord] = Table(self, "models")
        self.configs: Table[ConfigRecord] = Table(self, "endpoint_configs")
        self.endpoints: Table[EndpointRecord] = Table(self, "endpoints")
        self.components: Table[ComponentRecord] = Table(self, "inference_components")

    @classmethod
    def open(cls, state_dir: Path) -> State:
        return cls(state_dir / STATE_FILE)

    @contextmanager
    def cursor(self) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cursor = self._db.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Everything inside commits together or not at all. Nested transactions are savepoints: an inner one
        that fails is undone alone, and the outer one goes on if its caller handles the error."""
        with self._lock:
            depth = self._depth
            self._db.execute("BEGIN IMMEDIATE" if depth == 0 else f"SAVEPOINT nested{depth}")
            self._depth += 1
            try:
                yield self._db
            except BaseException:
                self._depth -= 1
                if depth == 0:
                    self._db.execute("ROLLBACK")
                else:
                    self._db.execute(f"ROLLBACK TO nested{depth}")
                    self._db.execute(f"RELEASE nested{depth}")
                raise
            self._depth -= 1
            self._db.execute("COMMIT" if depth == 0 else f"RELEASE nested{depth}")

    @property
    def changes(self) -> int:
        """Rows changed through this connection since it opened (a backup is due when it moves)."""
        with self._lock:
            return self._db.total_changes

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_database(path: Path, schema: Schema) -> sqlite3.Connection:
    """The database at `path`, checked, versioned and with every table; a new one when there is no file.
    Raises StateDamaged or StateTooNew instead of touching a file it cannot read."""
    private_dir(path.parent)
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
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)
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
    _sync_dir(path.parent)


def private_dir(folder: Path) -> None:
    """Make `folder` (and its missing parents) and keep it to this user: it holds tokens."""
    folder.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    try:
        if folder.stat().st_mode & 0o077:
            os.chmod(folder, DIR_MODE)
    except OSError as error:
        log.warning("could not make %s private (mode 0700): %s; it holds models' Environment blocks", folder, error)


def _sync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class StoreFile:
    """A state-folder SQLite file of one store (`FILE`, `SCHEMA`, set by each subclass) behind one lock: opened and
    checked by open_database (StateDamaged when unreadable, never replaced); `changes` tells the backups whether
    it changed since they last copied it."""

    FILE: str
    SCHEMA: Schema

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = open_database(path, self.SCHEMA)

    @classmethod
    def open(cls, state_dir: Path) -> Self:
        return cls(state_dir / cls.FILE)

    @property
    def changes(self) -> int:
        with self._lock:
            return self._db.total_changes
