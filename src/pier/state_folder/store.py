"""One interface for every store that keeps a file in the state folder (`StoreFile`).

A store declares itself: its file (`FILE`), what the file holds (`SCHEMA`: tables, and each kind of row with how it
reads, `rows.Rows`), whether a gateway needs it (`REQUIRED`) and how to mend a row that does not read (`MEND`);
the gateway lists it once (`pier.gateway.state_files.STORES`). From that alone it is opened and checked (damage
refused with `StateDamaged`, never replaced), read by `pier state check`, backed up on the gateway's schedule,
restored by `pier state restore` (each through `state_file()`) and closed.

How a file is opened, checked and copied, and how a transaction begins, is the store's `Driver`: SQLite's
(`SQLITE`) for every store now. A database server (issue 40) is one more Driver; each store's SQL stays its own
(plain DB-API calls: `execute`, `executemany`, `rowcount`, `fetchone`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Protocol, Self

from pier.state_folder.database import Schema, open_database
from pier.state_folder.files import Database, StateFile


class Driver(Protocol):
    """Where a store's data is kept and how it is reached: the one seam between the stores and their database."""

    begin: str  # the statement that opens a write transaction

    def open(self, path: Path, schema: Schema) -> sqlite3.Connection:
        """The database, checked and with every table (StateDamaged, StateTooNew: never replaced)."""
        ...

    def state_file(self, name: str, schema: Schema, *, required: bool, mend: str) -> StateFile:
        """How the store's file is checked and copied (for `pier state check`, backups and restore)."""
        ...

    def changes(self, db: sqlite3.Connection) -> int:
        """A count that moves whenever a row changes (a backup is due)."""
        ...


class Sqlite:
    """A SQLite file of the state folder (`database.py`: WAL, `user_version`; `files.Database`: online backup)."""

    begin = "BEGIN IMMEDIATE"  # takes the write lock first: a writer never fails half way on a busy file

    def open(self, path: Path, schema: Schema) -> sqlite3.Connection:
        return open_database(path, schema)

    def state_file(self, name: str, schema: Schema, *, required: bool, mend: str) -> StateFile:
        return Database(name, schema, required=required, mend=mend)

    def changes(self, db: sqlite3.Connection) -> int:
        return db.total_changes


SQLITE = Sqlite()


class StoreFile:
    """A store's file behind one lock. Every change is in a transaction (`transaction()`, or one statement);
    nested transactions are savepoints, so an inner one that fails is undone alone."""

    FILE: ClassVar[str]
    SCHEMA: ClassVar[Schema]
    MEND: ClassVar[str]  # how to mend one row that does not read, for `pier state check`
    REQUIRED: ClassVar[bool] = False  # its absence is a problem (else: nothing made yet)
    DRIVER: ClassVar[Driver] = SQLITE

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()  # the store's own package may hold it over several statements
        self._depth = 0  # transactions open on this connection (nested ones are savepoints)
        self.db = self.DRIVER.open(path, self.SCHEMA)

    @classmethod
    def open(cls, state_dir: Path) -> Self:
        return cls(state_dir / cls.FILE)

    @classmethod
    def for_gateway(cls, state_dir: Path) -> Self | None:
        """The store as a gateway opens it; a store the gateway can serve without answers None when its file
        cannot be used (and says so)."""
        return cls.open(state_dir)

    @classmethod
    def state_file(cls) -> StateFile:
        return cls.DRIVER.state_file(cls.FILE, cls.SCHEMA, required=cls.REQUIRED, mend=cls.MEND)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Everything inside commits together or not at all."""
        with self.lock:
            depth = self._depth
            self.db.execute(self.DRIVER.begin if depth == 0 else f"SAVEPOINT nested{depth}")
            self._depth += 1
            try:
                yield self.db
            except BaseException:
                self._depth -= 1
                if depth == 0:
                    self.db.execute("ROLLBACK")
                else:
                    self.db.execute(f"ROLLBACK TO nested{depth}")
                    self.db.execute(f"RELEASE nested{depth}")
                raise
            self._depth -= 1
            self.db.execute("COMMIT" if depth == 0 else f"RELEASE nested{depth}")

    @property
    def changes(self) -> int:
        """Rows changed through this connection since it opened (a backup is due when it moves)."""
        with self.lock:
            return self.DRIVER.changes(self.db)

    def close(self) -> None:
        with self.lock:
            self.db.close()
