"""`pier state migrate --to postgresql://…`: the state folder's SQLite stores moved into a PostgreSQL database, for
gateways that start with `--state-url` from then on.

- Only into a database without pier's state: one whose store schemas (`pier_state`, …) exist already is refused
  before anything is written (two states would mix), and the message says how to proceed.
- In one transaction: every store's schema is made and filled, or, should anything fail, none is left behind.
- Counted after: each table's rows in the database against the file's; a difference is an error (`Moved.ok`).

The files are read, never changed, and stay where they are (the CLI holds the folder's gateway lock meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pier.state_folder.database import open_database
from pier.state_folder.errors import StateError
from pier.state_folder.postgres import Postgres, namespace, shown
from pier.state_folder.store import StoreFile

# A store the folder keeps in a file of its own shape (keys.json): its rows per table, in the tables' column order.
Loader = Callable[[Path], Mapping[str, Sequence[Sequence[Any]]]]


@dataclass(frozen=True)
class Moved:
    """One table moved: its rows in the folder's file, and those counted in the database afterwards."""

    schema: str
    table: str
    rows: int
    counted: int

    @property
    def ok(self) -> bool:
        return self.rows == self.counted


def already_there(conn: Any, schemas: Sequence[str]) -> list[str]:
    """The schemas among `schemas` the database has already."""
    found = conn.execute("SELECT schema_name FROM information_schema.schemata WHERE schema_name = ANY(%s)",
                         (list(schemas),)).fetchall()
    return sorted(row[0] for row in found)


def refusal(url: str, present: Sequence[str]) -> str:
    drops = "; ".join(f"DROP SCHEMA {name} CASCADE" for name in present)
    return (f"The database {shown(url)} holds pier's state already (schemas {', '.join(present)}): pier migrates "
            "a state folder only into a database without it, so that two states never mix. To replace what is "
            f"there, stop the gateways that use it, keep a dump (pg_dump), drop those schemas ({drops}) and run "
            "this again; or give another database with --to.")


def text_value(value: Any, where: str) -> Any:
    """A value as PostgreSQL takes it: SQLite may keep bytes in a TEXT column, PostgreSQL's text is UTF-8."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise StateError(f"{where} holds text that is not UTF-8, which PostgreSQL cannot keep: mend or delete "
                         "that row (pier state check lists it), then migrate again.") from None


def migrate(folder: Path, url: str, stores: Sequence[type[StoreFile]],
            loaders: Mapping[type[StoreFile], Loader] | None = None) -> list[Moved]:
    """Every store of `folder` (a missing file: an empty store) into the database at `url`, and the stores read by
    `loaders` (from files of their own, keys.json); what was moved."""
    loaders = loaders or {}
    postgres = Postgres(url)
    conn = postgres.connect()
    sources = {store: open_database(folder / store.FILE, store.SCHEMA)
               for store in stores if (folder / store.FILE).is_file()}
    try:
        rows: dict[tuple[str, str], int] = {}
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('pier migrate'))")
            present = already_there(conn, [namespace(store.FILE) for store in stores])
            if present:
                raise StateError(refusal(url, present))
            for store in stores:
                schema = namespace(store.FILE)
                conn.execute(f"SET LOCAL search_path = {schema}")
                postgres.prepare(conn, schema, store.SCHEMA)
                if store in sources:
                    for table in store.SCHEMA.tables:
                        rows[schema, table] = _copy(sources[store], conn, store.FILE, table)
                elif store in loaders:
                    for table, values in loaders[store](folder).items():
                        rows[schema, table] = _insert(conn, table, values)
                _continue_identities(conn, schema)
        return [Moved(schema, table, count, _count(conn, f"{schema}.{table}"))
                for (schema, table), count in rows.items()]
    finally:
        for source in sources.values():
            source.close()
        conn.close()


def _copy(source: Any, conn: Any, file: str, table: str) -> int:
    cursor = source.execute(f"SELECT * FROM {table}")
    columns = [d[0] for d in cursor.description]
    names = ", ".join(columns)
    marks = ", ".join("%s" for _ in columns)
    copied = 0
    with conn.cursor() as out:
        while batch := cursor.fetchmany(500):
            out.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks})",
                            [tuple(text_value(v, f"A row of {table} in {file}") for v in row) for row in batch])
            copied += len(batch)
    return copied


def _insert(conn: Any, table: str, values: Sequence[Sequence[Any]]) -> int:
    if values:
        marks = ", ".join("%s" for _ in values[0])
        with conn.cursor() as out:
            out.executemany(f"INSERT INTO {table} VALUES ({marks})", [tuple(row) for row in values])
    return len(values)


def _continue_identities(conn: Any, schema: str) -> None:
    """Numbered columns (AUTOINCREMENT's) go on after the highest number moved, as SQLite's would."""
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = %s AND "
            "is_identity = 'YES'", (schema,)).fetchall():
        conn.execute(f"SELECT setval(pg_get_serial_sequence(%s, %s), max({column})) FROM {schema}.{table} "
                     f"HAVING max({column}) IS NOT NULL", (f"{schema}.{table}", column))


def _count(conn: Any, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
