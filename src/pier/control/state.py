"""The control plane's state in one SQLite file, so a restarted gateway brings back every resource.

One table per kind; a row is the record as JSON, keyed by name without regard to case (SageMaker names
are unique regardless of case). Writes are single statements in autocommit mode with WAL, so a crash
leaves either the old row or the new one.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

from pier.control.records import ComponentRecord, ConfigRecord, EndpointRecord, ModelRecord, Record

R = TypeVar("R", bound=Record)

SCHEMA_VERSION = 1
STATE_FILE = "state.sqlite3"


class Table(Generic[R]):
    def __init__(self, state: State, name: str, record: type[R]) -> None:
        self._state = state
        self._name = name
        self._record = record
        with state.cursor() as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {name} (name TEXT PRIMARY KEY COLLATE NOCASE, created REAL NOT NULL, "
                "body TEXT NOT NULL)"
            )

    def get(self, name: str) -> R | None:
        with self._state.cursor() as cursor:
            row = cursor.execute(f"SELECT body FROM {self._name} WHERE name = ?", (name,)).fetchone()
        return self._record.model_validate_json(row[0]) if row else None

    def insert(self, record: R) -> bool:
        """False when a record of that name (in any case) exists already."""
        with self._state.cursor() as cursor:
            cursor.execute(
                f"INSERT OR IGNORE INTO {self._name} (name, created, body) VALUES (?, ?, ?)",
                (record.name, record.created, record.model_dump_json()),
            )
            return cursor.rowcount == 1

    def put(self, record: R) -> None:
        with self._state.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {self._name} (name, created, body) VALUES (?, ?, ?) "
                "ON CONFLICT(name) DO UPDATE SET body = excluded.body",
                (record.name, record.created, record.model_dump_json()),
            )

    def delete(self, name: str) -> bool:
        with self._state.cursor() as cursor:
            cursor.execute(f"DELETE FROM {self._name} WHERE name = ?", (name,))
            return cursor.rowcount == 1

    def all(self) -> list[R]:
        """Oldest first."""
        with self._state.cursor() as cursor:
            rows = cursor.execute(f"SELECT body FROM {self._name} ORDER BY created, name").fetchall()
        return [self._record.model_validate_json(row[0]) for row in rows]


class State:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._check_version()
        self.models = Table(self, "models", ModelRecord)
        self.configs = Table(self, "endpoint_configs", ConfigRecord)
        self.endpoints = Table(self, "endpoints", EndpointRecord)
        self.components = Table(self, "inference_components", ComponentRecord)

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

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _check_version(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path} was written by a pier with state schema {version}, this one reads {SCHEMA_VERSION}: "
                "use that pier, or another --state-dir."
            )
