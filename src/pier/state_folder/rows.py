"""A store's rows, parsed in one place: each store declares the kinds of row it keeps (`Rows`: how they are selected
and how one reads as its record), and `read_rows` goes over them for `pier state check`, backups and restore, while
the store reads its own rows with the same `read`. A row that does not read is a `BadRow`: only that row is lost,
with why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")
Row = tuple[Any, ...]


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


@dataclass
class RowsRead:
    counts: dict[str, int] = field(default_factory=dict)  # table (or kind) -> rows that read
    bad: list[BadRow] = field(default_factory=list)
    names: set[str] = field(default_factory=set)  # "<kind> <name>" of every row, read or not (what a backup lacks)


@dataclass(frozen=True)
class Rows(Generic[T]):
    """One kind of row a store keeps."""

    table: str
    select: str  # every row of the kind, its columns as `read` and `label` take them, in the order they are named
    read: Callable[[Row], T | BadRow]  # the row as its record (the store's own reads use this too)
    label: Callable[[Row], tuple[str, str]]  # (kind, name) of a row, read or not, as messages name it
    counted: str | None = None  # the key its count is reported under; None: each row's kind
    zero: bool = False  # report a count of 0 too

    def key(self, kind: str) -> str:
        return self.counted or kind


class Readable(Protocol):
    """What reading rows needs of a database connection (a DB-API one: sqlite3's, a server's driver's)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...


def read_rows(db: Readable, kinds: tuple[Rows[Any], ...], tables: set[str],
              tallies: tuple[tuple[str, str], ...] = ()) -> RowsRead:
    """Every row of `kinds` read as its store reads it, from the `tables` present (a file from before a table was
    added lacks it); `tallies`: (count's key, table) of tables only counted, whose rows are numbers (metrics)."""
    read = RowsRead()
    for rows in kinds:
        if rows.table not in tables:
            continue
        if rows.zero and rows.counted:
            read.counts.setdefault(rows.counted, 0)
        for row in db.execute(rows.select).fetchall():
            kind, name = rows.label(row)
            read.names.add(f"{kind} {name}")
            found = rows.read(row)
            if isinstance(found, BadRow):
                read.bad.append(found)
            else:
                key = rows.key(kind)
                read.counts[key] = read.counts.get(key, 0) + 1
    for key, table in tallies:
        if table in tables:
            read.counts[key] = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
    return read


def text(value: Any) -> str:
    """A stored name as text: read as bytes (CAST AS BLOB), a name that is not UTF-8 still names its row."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
