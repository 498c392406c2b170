"""One interface for every store that keeps a file in the state folder (`StoreFile`).

A store declares itself: its file (`FILE`), what the file holds (`SCHEMA`: tables, and each kind of row with how it
reads, `rows.Rows`), whether a gateway needs it (`REQUIRED`) and how to mend a row that does not read (`MEND`);
the gateway lists it once (`pier.gateway.state_files.STORES`). From that alone it is opened and checked (damage
refused with `StateDamaged`, never replaced), read by `pier state check`, backed up on the gateway's schedule,
restored by `pier state restore` (each through `state_file()`) and closed.

How a file is opened, checked and copied, and how a transaction begins, is the store's `Driver`: SQLite's
(`SQLITE`) by default, or PostgreSQL's (`postgres.Postgres`, `pier up --state-url`), handed to `open`. Each store's
SQL stays its own, written for SQLite (plain DB-API calls: `execute`, `executemany`, `rowcount`, `fetchone`); the
PostgreSQL driver translates what differs.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from pier.state_folder.database import Schema, open_database
from pier.state_folder.files import Database, StateFile


class Cursor(Protocol):
    """What the stores read of a statement's result (sqlite3's cursor, psycopg's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A store's database connection as the stores use it: SQLite's SQL, `?` placeholders."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Cursor: ...

    def close(self) -> None: ...


class Driver(Protocol):
    """Where a store's data is kept and how it is reached: the one seam between the stores and their database."""

    @property
    def begin(self) -> str:
        """The statement that opens a write transaction."""
        ...

    @property
    def for_update(self) -> str:
        """What ends a SELECT whose row must stay as read until the transaction's write (none in SQLite, whose
        write transaction holds the whole file)."""
        ...

    def open(self, path: Path, schema: Schema) -> Connection:
        """The database, checked and with every table (StateDamaged, StateTooNew: never replaced)."""
        ...

    def state_file(self, name: str, schema: Schema, *, required: bool, mend: str) -> StateFile:
        """How the store's file is checked and copied (for `pier state check`, backups and restore)."""
        ...

    def changes(self, db: Any) -> int:
        """A count that moves whenever a row changes (a backup is due)."""
        ...


class Sqlite:
    """A SQLite file of the state folder (`database.py`: WAL, `user_version`; `files.Database`: online backup)."""

    begin = "BEGIN IMMEDIATE"  # takes the write lock first: a writer never fails half way on a busy file
    for_update = ""

    def open(self, path: Path, schema: Schema) -> Connection:
        return open_database(path, schema)

    def state_file(self, name: str, schema: Schema, *, required: bool, mend: str) -> StateFile:
        return Database(name, schema, required=required, mend=mend)

    def changes(self, db: Any) -> int:
        return db.total_changes if isinstance(db, sqlite3.Connection) else 0


SQLITE = Sqlite()


class StoreFile:
    """A store's file behind one lock. Every change is in a transaction (`transaction()`, or one statement);
    nested transactions are savepoints, so an inner one that fails is undone alone."""

    FILE: ClassVar[str]
    SCHEMA: ClassVar[Schema]
    MEND: ClassVar[str]  # how to mend one row that does not read, for `pier state check`
    REQUIRED: ClassVar[bool] = False  # its absence is a problem (else: nothing made yet)
    DRIVER: ClassVar[Driver] = SQLITE  # the state folder's files unless `open` is handed another

    def __init__(self, path: Path, driver: Driver | None = None) -> None:
        self.path = path
        self.driver = driver or self.DRIVER
        self.lock = threading.RLock()  # the store's own package may hold it over several statements
        self._depth = 0  # transactions open on this connection (nested ones are savepoints)
        self.db = self.driver.open(path, self.SCHEMA)

    @classmethod
    def open(cls, state_dir: Path, driver: Driver | None = None) -> Self:
        return cls(state_dir / cls.FILE, driver)

    @classmethod
    def for_gateway(cls, state_dir: Path, driver: Driver | None = None) -> Self | None:
        """The store as a gateway opens it; a store the gateway can serve without answers None when its file
        cannot be used (and says so)."""
        return cls.open(state_dir, driver)

    @property
    def in_folder(self) -> bool:
        """Whether it is a file of the state folder (backed up on the gateway's schedule), not a database's."""
        return self.driver is SQLITE

    @classmethod
    def state_file(cls) -> StateFile:
        return cls.DRIVER.state_file(cls.FILE, cls.SCHEMA, required=cls.REQUIRED, mend=cls.MEND)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Everything inside commits together or not at all."""
        with self.lock:
            depth = self._depth
            self.db.execute(self.driver.begin if depth == 0 else f"SAVEPOINT nested{depth}")
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
            return self.driver.changes(self.db)

    def close(self) -> None:
        with self.lock:
            self.db.close()
