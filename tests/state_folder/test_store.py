"""The one store interface: a store that declares its file, schema, rows and mend is opened, checked, backed up,
restored and closed with nothing more of its own."""

from __future__ import annotations

import contextlib
import sqlite3
import stat
from pathlib import Path

import pytest

from pier.control import backups
from pier.state_folder.database import Schema
from pier.state_folder.errors import StateDamaged
from pier.state_folder.rows import BadRow, Row, Rows
from pier.state_folder.store import Driver, StoreFile


def note(row: Row) -> str | BadRow:
    return row[1] if isinstance(row[1], str) else BadRow("note", str(row[0]), 0.0, "its text is not text")


class Notes(StoreFile):
    """A sixth store, as a new one joins: declared, nothing else."""

    FILE = "notes.sqlite3"
    SCHEMA = Schema(1, ("CREATE TABLE IF NOT EXISTS notes (name TEXT PRIMARY KEY, body)",), ("notes",),
                    "no notes", (Rows("notes", "SELECT name, body FROM notes ORDER BY name", note,
                                      lambda row: ("note", str(row[0])), counted="notes"),))
    MEND = "Write the note again"

    def put(self, name: str, body: object) -> None:
        with self.transaction() as db:
            db.execute("INSERT INTO notes VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET body = excluded.body",
                       (name, body))

    def names(self) -> list[str]:
        with self.lock:
            return [row[0] for row in self.db.execute("SELECT name FROM notes ORDER BY name")]


def test_a_declared_store_is_opened_private_and_checked_row_by_row(tmp_path: Path) -> None:
    store = Notes.open(tmp_path)
    assert stat.S_IMODE((tmp_path / Notes.FILE).stat().st_mode) == 0o600
    store.put("a", "first")
    store.put("b", 2)
    report = Notes.state_file().check(tmp_path / Notes.FILE)
    assert report.records == {"notes": 1}
    assert [(row.kind, row.name, row.reason) for row in report.unreadable] == [("note", "b", "its text is not text")]
    assert report.names == {"note a", "note b"}
    assert "Write the note again" in report.advice()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        store.names()


class TypedNotes(Notes):
    """Notes whose body is text, as a store that runs on PostgreSQL too declares its columns."""

    SCHEMA = Schema(1, ("CREATE TABLE IF NOT EXISTS notes (name TEXT PRIMARY KEY, body TEXT)",), ("notes",),
                    "no notes")


def test_a_closed_store_refuses_to_read(tmp_path: Path, driver: Driver | None) -> None:
    store = TypedNotes.open(tmp_path, driver)
    store.put("a", "first")
    assert store.names() == ["a"]
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.names()


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda path: path.write_bytes(b"garbage" * 1000), "SQLite says file is not a database"),
    (lambda path: path.write_bytes(b""), "the file is empty (0 bytes): it was truncated"),
    (lambda path: path.mkdir(), "it is a folder, not a file"),
])
def test_a_damaged_file_is_refused_and_left_as_it_is(tmp_path: Path, damage: object, problem: str) -> None:
    path = tmp_path / Notes.FILE
    damage(path)  # type: ignore[operator]
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(StateDamaged) as refused:
        Notes.open(tmp_path)
    assert refused.value.problem == problem and "start with no notes" in str(refused.value)
    assert (path.read_bytes() if path.is_file() else None) == before


@pytest.mark.parametrize(("inner_fails", "outer_fails", "kept"), [
    (False, False, ["a", "b"]),
    (True, False, ["a"]),  # a nested transaction that fails is undone alone
    (False, True, []),  # the outer one takes everything with it
])
def test_nested_transactions_are_savepoints(tmp_path: Path, inner_fails: bool, outer_fails: bool,
                                            kept: list[str], driver: Driver | None) -> None:
    store = TypedNotes.open(tmp_path, driver)
    with pytest.raises(RuntimeError) if outer_fails else contextlib.nullcontext(), store.transaction() as db:
        db.execute("INSERT INTO notes VALUES ('a', 'x')")
        try:
            with store.transaction() as inner:
                inner.execute("INSERT INTO notes VALUES ('b', 'y')")
                if inner_fails:
                    raise ValueError("undone")
        except ValueError:
            pass
        if outer_fails:
            raise RuntimeError("all undone")
    assert store.names() == kept


def test_changes_move_and_a_backup_restores_the_store(tmp_path: Path) -> None:
    store = Notes.open(tmp_path)
    before = store.changes
    store.put("a", "kept")
    assert store.changes > before
    made = backups.backup(Notes.state_file(), store.path)
    store.put("b", "lost")
    store.close()
    (restored,) = backups.restore(tmp_path, (Notes.state_file(),), made)
    assert restored.lacks == ("note b",)
    again = Notes.open(tmp_path)
    assert again.names() == ["a"]

