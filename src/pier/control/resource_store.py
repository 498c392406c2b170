"""The control plane's state in one SQLite file, so a restarted gateway brings back every resource.

One table per kind; a row is the record as JSON, keyed by name without regard to case (SageMaker names
are unique regardless of case). The file is opened as every SQLite file of the state folder is
(`pier.state_folder.store.StoreFile`: WAL, a schema version, a damaged file refused with `StateDamaged`, never
replaced), and:

- every change is in a transaction (`ResourceStore.transaction()`, nested ones savepoints; a Table's writes open one of
  their own, and a caller may group several writes in one), so a crash leaves each change whole or not at all.
- One row whose JSON no longer reads as its record (a schema change, a hand edit) makes only that resource
  unreadable: `Table.all()` leaves it out, `Table.unreadable()` lists it with why, `Table.get()` raises
  `UnreadableRecord` for it, and `Table.delete()` still removes it.

Backups, restore and the checks behind `pier state` are in `backups.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import pydantic

from pier.control.errors import ControlError
from pier.control.records import ComponentRecord, ConfigRecord, EndpointRecord, ModelRecord, Record
from pier.state_folder.database import Schema
from pier.state_folder.rows import BadRow, Rows, text
from pier.state_folder.store import Connection, Driver, StoreFile

R = TypeVar("R", bound=Record)

SCHEMA_VERSION = 1
STATE_FILE = "state.sqlite3"

# table name -> (record class, the resource as SageMaker's messages name it)
TABLES: dict[str, tuple[type[Record], str]] = {
    "models": (ModelRecord, "model"),
    "endpoint_configs": (ConfigRecord, "endpoint configuration"),
    "endpoints": (EndpointRecord, "endpoint"),
    "inference_components": (ComponentRecord, "inference component"),
}


class UnreadableRecord(ControlError):
    """The resource exists but its stored record cannot be read (see `BadRow`)."""

    code = "unreadable_record"

    def __init__(self, row: BadRow) -> None:
        super().__init__(f'{row.kind.capitalize()} "{row.name}": {row.failure_reason}')
        self.row = row


def read_row(table: str, name: Any, created: Any, body: Any) -> Record | BadRow:
    """One stored row as its record, or as a BadRow saying why it is not one."""
    record_type, kind = TABLES[table]
    label = text(name)
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
    def __init__(self, state: ResourceStore, name: str) -> None:
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
                f"INSERT INTO {self._name} (name, created, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
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

    def replace(self, old: R, new: R) -> bool:
        """Store `new` only while the stored record is still `old`; False (and nothing written) when it changed
        or went. The reconciler, on the event loop, decides from records it read earlier, while control-plane calls
        change them on the writer thread: a plain put would undo a DeleteInferenceComponent or a new CopyCount
        that landed in between. Skipped, the write is decided again, from the new record, on the next tick."""
        with self._state.transaction() as db:
            if not self._still(db, old):
                return False
            db.execute(f"UPDATE {self._name} SET body = ? WHERE name = ?", (new.model_dump_json(), old.name))
            return True

    def delete_if(self, old: R) -> bool:
        """Remove the row only while it is still `old`: not a record made again under the same name since."""
        with self._state.transaction() as db:
            return self._still(db, old) and db.execute(
                f"DELETE FROM {self._name} WHERE name = ?", (old.name,)).rowcount == 1

    def _still(self, db: Connection, old: R) -> bool:
        row = db.execute(self._select + " WHERE name = ?" + self._state.driver.for_update, (old.name,)).fetchone()
        return row is not None and read_row(self._name, *row) == old

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


def _rows(table: str) -> Rows[Record]:
    # The body as bytes: text that is not UTF-8 makes that one row unreadable, not the whole query.
    return Rows(table, f"SELECT CAST(name AS BLOB), created, CAST(body AS BLOB) FROM {table} ORDER BY created, name",
                lambda row: read_row(table, *row), lambda row: (TABLES[table][1], text(row[0])), counted=table,
                zero=True)


STATE_SCHEMA = Schema(
    SCHEMA_VERSION,
    tuple(f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY COLLATE NOCASE, created REAL NOT NULL, "
          "body TEXT NOT NULL)" for table in TABLES),
    tuple(TABLES), "no resources", tuple(_rows(table) for table in TABLES))


class ResourceStore(StoreFile):
    FILE = STATE_FILE
    SCHEMA = STATE_SCHEMA
    MEND = "Delete each (pier delete, or the SageMaker Delete* call) and create it again"
    REQUIRED = True

    def __init__(self, path: Path, driver: Driver | None = None) -> None:
        super().__init__(path, driver)
        self.models: Table[ModelRecord] = Table(self, "models")
        self.configs: Table[ConfigRecord] = Table(self, "endpoint_configs")
        self.endpoints: Table[EndpointRecord] = Table(self, "endpoints")
        self.components: Table[ComponentRecord] = Table(self, "inference_components")

    @contextmanager
    def cursor(self) -> Iterator[Connection]:
        with self.lock:
            yield self.db
