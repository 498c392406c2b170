"""The files of a state folder, each checked, copied and read through one interface, so every file gets the same
care: refused with its name and the fix when damaged, listed by `pier state check`, backed up on the gateway's
schedule and put back by `pier state restore` (backups.py does those over `FILES`).

    state.sqlite3        the control plane's resources (state.py)
    autoscaling.sqlite3  scalable targets, policies, alarms, activities, metric history (pier.autoscaling.store)
    keys.json            the gateway's keys (pier.security.keystore)
    sessions.sqlite3     the open stateful sessions, each with its copy (pier.runtime.session_store)
    async.sqlite3        asynchronous inference requests accepted and not yet answered (pier.runtime.async_queue)
    transforms.sqlite3   transform jobs and the progress of running ones (pier.transform.store)

Each file is read as the gateway reads it: a file that cannot be read at all is a *problem*; a row (a record, a
key) that does not read is *unreadable*, with its name and why. A backup counts as good only when it has neither.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

from pier.autoscaling import store as autoscaling
from pier.control.state import (
    FILE_MODE,
    SIDE_FILES,
    STATE_FILE,
    STATE_SCHEMA,
    BadRow,
    Schema,
    StateError,
    backup_pattern,
    damage_advice,
    missing_tables,
)
from pier.runtime import async_queue, session_store
from pier.security import keystore
from pier.transform import store as transform_store


@dataclass
class Report:
    """One file as `pier state check` sees it."""

    path: Path
    without: str  # what starting without the file means
    mend: str  # how to mend one unreadable row
    problems: list[str] = field(default_factory=list)  # what makes the file unusable
    records: dict[str, int] = field(default_factory=dict)  # table (or kind) -> rows that read
    unreadable: list[BadRow] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # "<kind> <name>" of every row, read or not
    version: int | None = None
    present: bool = True
    backups: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unreadable

    def advice(self) -> str:
        if self.problems:
            return damage_advice(self.path, self.without)
        if self.unreadable:
            return (f"{self.path.name} is sound; only the rows above do not read. {self.mend}, or restore a backup: "
                    f"pier state restore --state-dir {self.path.parent}")
        return ""


class StateFile(ABC):
    def __init__(self, name: str, *, required: bool, without: str, mend: str) -> None:
        self.name = name
        self.required = required  # its absence is a problem (else: nothing made yet)
        self.without = without
        self.mend = mend

    @property
    def pattern(self) -> str:
        """The glob of its backups' names."""
        return backup_pattern(self.name)

    def check(self, path: Path) -> Report:
        """The file read as the gateway reads it. Reads only; works while a gateway runs."""
        report = Report(path, self.without, self.mend)
        if not path.exists():
            report.present = False
            if self.required:
                report.problems.append("there is no state file (a gateway makes one when it first starts)")
            return report
        if path.stat().st_size == 0:
            report.problems.append("the file is empty (0 bytes): it was truncated")
            return report
        self._read(path, report)
        return report

    @abstractmethod
    def _read(self, path: Path, report: Report) -> None:
        """Fill in the report of a file that is there and not empty."""

    @abstractmethod
    def copy(self, source: Path, dest: Path) -> None:
        """A checked copy of `source` as the new file `dest` (0600), complete on disk; StateError (and no `dest`)
        when `source` cannot be copied whole."""


class Database(StateFile):
    """A SQLite file: copied with SQLite's online backup (safe while the gateway writes), checked with its
    integrity check and by reading every row."""

    def __init__(self, name: str, schema: Schema, *, required: bool, mend: str) -> None:
        super().__init__(name, required=required, without=schema.without, mend=mend)
        self.schema = schema

    def _read(self, path: Path, report: Report) -> None:
        try:
            with contextlib.closing(read_only(path)) as db:
                report.version = db.execute("PRAGMA user_version").fetchone()[0]
                integrity = [str(row[0]) for row in db.execute("PRAGMA integrity_check(20)").fetchall()]
                if integrity != ["ok"]:
                    report.problems.append("SQLite's integrity check found " + "; ".join(integrity))
                    return
                if report.version is not None and report.version > self.schema.version:
                    report.problems.append(f"it was written by a newer pier (state schema {report.version}; this "
                                           f"pier reads up to {self.schema.version})")
                    return
                if report.version:  # a file from before versions were kept gets its tables when it is opened
                    report.problems += [f"its table {table} is gone" for table in missing_tables(db, self.schema)]
                if report.problems:
                    return
                rows = self.schema.rows(db)
        except sqlite3.DatabaseError as error:
            report.problems.append(f"SQLite says {error}")
            return
        report.records, report.unreadable, report.names = rows.counts, rows.bad, rows.names

    def copy(self, source: Path, dest: Path) -> None:
        for suffix in ("", *SIDE_FILES):
            Path(f"{dest}{suffix}").unlink(missing_ok=True)
        os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
        try:
            with contextlib.closing(read_only(source)) as src, contextlib.closing(sqlite3.connect(dest)) as copy:
                src.backup(copy)
                copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
                problems = quick_check(copy)
                if problems:
                    raise StateError(f"The backup of {source} does not pass SQLite's quick check ({problems}); "
                                     "the file itself may be damaged: run pier state check.")
            _sync(dest)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise


class KeyFile(StateFile):
    """keys.json: a JSON document, copied byte for byte once it reads whole (a damaged key file is never backed
    up, so it never pushes a good backup out)."""

    def _read(self, path: Path, report: Report) -> None:
        try:
            keys, bad = keystore.read_document(path.read_bytes())
        except ValueError as error:
            report.problems.append(str(error))
            return
        report.records = {"keys": len(keys)}
        report.unreadable = [BadRow("key", name, 0.0, why) for name, why in bad]
        report.names = {f"key {k.principal.name}" for k in keys} | {f"key {name}" for name, _ in bad}

    def copy(self, source: Path, dest: Path) -> None:
        if not source.is_file():
            raise StateError(f"There is no file at {source}.")
        data = source.read_bytes()
        try:
            _, bad = keystore.read_document(data)
        except ValueError as error:
            raise StateError(keystore.damaged(source, str(error))) from None
        if bad:
            raise StateError(keystore.damaged(source, "; ".join(f"key {name}: {why}" for name, why in bad)))
        dest.unlink(missing_ok=True)
        descriptor = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
        except BaseException:
            dest.unlink(missing_ok=True)
            raise


STATE = Database(STATE_FILE, STATE_SCHEMA, required=True,
                 mend="Delete each (pier delete, or the SageMaker Delete* call) and create it again")
AUTOSCALING = Database(autoscaling.FILE, autoscaling.SCHEMA, required=False,
                       mend="Register (put) each again, or deregister (delete) it")
KEYS = KeyFile(keystore.FILE_NAME, required=False,
               without="no keys (create them again: pier keys create)",
               mend="Mend or remove each entry")
SESSIONS = Database(session_store.FILE, session_store.SCHEMA, required=False,
                    mend="Clients open new sessions; the row goes once its session expires or is closed")
ASYNC = Database(async_queue.FILE, async_queue.SCHEMA, required=False,
                 mend="Delete the row (its caller resends the request), or let it fail")
TRANSFORMS = Database(transform_store.FILE, transform_store.SCHEMA, required=False,
                      mend="Create the job again under another name")
FILES: tuple[StateFile, ...] = (STATE, AUTOSCALING, KEYS, SESSIONS, ASYNC, TRANSFORMS)


def by_name(name: str) -> StateFile:
    found = next((f for f in FILES if f.name == name), None)
    if found is None:
        raise StateError(f"pier keeps no state file called {name}: its files are "
                         f"{', '.join(f.name for f in FILES)}.")
    return found


def of_backup(path: Path) -> StateFile:
    """The state file a backup is a generation of, by its name."""
    found = next((f for f in FILES if path.match(f.pattern)), None)
    if found is None:
        raise StateError(f"{path.name} is not a backup pier made (their names are "
                         f"{', '.join(f.pattern for f in FILES)}).")
    return found


def refuse_damaged(state_dir: Path) -> None:
    """At start, for the files the gateway does not open as databases itself (keys.json): StateDamaged with the
    file's name and the fix when one cannot be read whole."""
    from pier.control.state import StateDamaged

    report = KEYS.check(state_dir / KEYS.name)
    if not report.ok:
        problems = report.problems + [f"key {row.name}: {row.reason}" for row in report.unreadable]
        raise StateDamaged(report.path, "; ".join(problems), KEYS.without)


def read_only(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StateError(f"There is no state file at {path}.")
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10.0)


def quick_check(db: sqlite3.Connection) -> str:
    problems = [str(row[0]) for row in db.execute("PRAGMA quick_check(5)").fetchall()]
    return "" if problems == ["ok"] else "; ".join(problems)


def _sync(path: Path) -> None:
    with open(path, "rb+") as file:
        os.fsync(file.fileno())
