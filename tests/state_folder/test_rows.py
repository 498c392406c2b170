"""The one place rows are parsed: every declared kind read as its store reads it, for check, backups and restore."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from pier.state_folder.rows import BadRow, Row, Rows, read_rows


def number(row: Row) -> int | BadRow:
    return row[1] if isinstance(row[1], int) else BadRow("note", str(row[0]), 0.0, "its value is not a number")


NOTES = Rows("notes", "SELECT name, value FROM notes ORDER BY name", number, lambda row: ("note", str(row[0])),
             counted="notes")
ZERO = Rows("notes", NOTES.select, number, NOTES.label, counted="notes", zero=True)
BY_KIND = Rows("notes", "SELECT name, value FROM notes ORDER BY name", number,
               lambda row: ("odd note" if isinstance(row[1], int) and row[1] % 2 else "even note", str(row[0])))


@pytest.mark.parametrize(("kinds", "stored", "counts", "bad", "names"), [
    ((NOTES,), [], {}, [], set()),
    ((ZERO,), [], {"notes": 0}, [], set()),
    ((NOTES,), [("a", 1), ("b", 2)], {"notes": 2}, [], {"note a", "note b"}),
    ((NOTES,), [("a", 1), ("b", "two")], {"notes": 1}, [("note", "b", "its value is not a number")],
     {"note a", "note b"}),
    ((ZERO,), [("b", "two")], {"notes": 0}, [("note", "b", "its value is not a number")], {"note b"}),
    ((BY_KIND,), [("a", 1), ("b", 2), ("c", 3)], {"odd note": 2, "even note": 1}, [],
     {"odd note a", "even note b", "odd note c"}),
])
def test_each_row_is_read_once_and_named(kinds: tuple[Rows[Any], ...], stored: list[tuple[str, object]],
                                         counts: dict[str, int], bad: list[tuple[str, str, str]],
                                         names: set[str]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE notes (name TEXT PRIMARY KEY, value)")
    db.executemany("INSERT INTO notes VALUES (?, ?)", stored)
    read = read_rows(db, kinds, {"notes"})
    assert read.counts == counts
    assert [(row.kind, row.name, row.reason) for row in read.bad] == bad
    assert read.names == names


@pytest.mark.parametrize(("tables", "counts"), [
    (set(), {}),  # a file from before its tables were added: nothing to read, nothing wrong
    ({"notes"}, {"notes": 1}),
    ({"notes", "points"}, {"notes": 1, "points": 3}),
])
def test_only_the_tables_present_are_read_and_tallies_are_counted(tables: set[str], counts: dict[str, int]) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE notes (name TEXT PRIMARY KEY, value)")
    db.execute("CREATE TABLE points (ts INTEGER)")
    db.execute("INSERT INTO notes VALUES ('a', 1)")
    db.executemany("INSERT INTO points VALUES (?)", [(1,), (2,), (3,)])
    read = read_rows(db, (NOTES,), tables, (("points", "points"),))
    assert read.counts == counts
