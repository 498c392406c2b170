"""A file of the state folder behind one interface (`StateFile`: checked as the gateway reads it, copied whole),
so every file gets the same care: refused with its name and the fix when damaged, listed by `pier state check`,
backed up on the gateway's schedule and put back by `pier state restore` (pier.control.backups). Which files the
folder holds is the gateway's list (`pier.gateway.state_files.FILES`), passed to whatever goes over all of them.

Each file is read as the gateway reads it: a file that cannot be read at all is a *problem*; a row (a record, a
key) that does not read is *unreadable*, with its name and why. A backup counts as good only when it has neither.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pier.state_folder.database import Schema, missing_tables
from pier.state_folder.errors import StateError, damage_advice
from pier.state_folder.layout import FILE_MODE, SIDE_FILES, backup_pattern, not_a_file
from pier.state_folder.rows import BadRow, read_rows


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
        if (problem := not_a_file(path)) is not None:
            report.problems.append(problem)
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
                tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                rows = read_rows(db, self.schema.rows, tables, self.schema.tallies)
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


def by_name(files: Sequence[StateFile], name: str) -> StateFile:
    found = next((f for f in files if f.name == name), None)
    if found is None:
        raise StateError(f"pier keeps no state file called {name}: its files are "
                         f"{', '.join(f.name for f in files)}.")
    return found


def of_backup(files: Sequence[StateFile], path: Path) -> StateFile:
    """The state file a backup is a generation of, by its name."""
    found = next((f for f in files if path.match(f.pattern)), None)
    if found is None:
        raise StateError(f"{path.name} is not a backup pier made (their names are "
                         f"{', '.join(f.pattern for f in files)}).")
    return found


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
