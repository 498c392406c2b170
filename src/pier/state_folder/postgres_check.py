"""`pier state check --state-url postgresql://…`: every store's schema in the state database checked as `pier state
check` checks the folder's files: the schema's version (a newer pier's is named, never read), its tables, and every
row read as the gateway reads it (`Schema.rows`: a row that does not read is named, with why).

It only reads: its connection's transactions are read-only, and a schema the database lacks is reported, not made
(a gateway makes it when it first starts on the database).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pier.state_folder.files import Report
from pier.state_folder.postgres import VERSION_TABLE, PgConnection, Postgres, namespace, shown
from pier.state_folder.rows import read_rows
from pier.state_folder.store import StoreFile


def check_database(url: str, stores: Sequence[type[StoreFile]]) -> list[Report]:
    """A report for each store's schema in the database at `url` (StateError: it cannot be reached). A report's
    `path` is the schema's name."""
    driver = Postgres(url)
    reports = []
    for store in stores:
        name = namespace(store.FILE)

        def connect(name: str = name) -> Any:
            conn = driver.connect(search_path=name)
            conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            return conn
        conn = connect()
        try:
            reports.append(_check(conn, PgConnection(connect, shown(url), conn), name, store))
        finally:
            conn.close()
    return reports


def _check(conn: Any, db: PgConnection, name: str, store: type[StoreFile]) -> Report:
    import psycopg

    schema = store.SCHEMA
    report = Report(Path(name), schema.without, store.MEND)
    tables = {row[0] for row in conn.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (name,))}
    if not tables:
        report.present = False
        if store.REQUIRED:
            report.problems.append(f"there is no schema {name} (a gateway makes it when it first starts)")
        return report
    try:
        report.version = _version(conn, tables)
        if report.version is None:
            report.problems.append(f"its table {VERSION_TABLE} is gone or empty, so its version is not known")
            return report
        if report.version > schema.version:
            report.problems.append(f"it was written by a newer pier (state schema {report.version}; this pier "
                                   f"reads up to {schema.version})")
            return report
        if report.version == schema.version:  # an older one gets its tables when a gateway opens it
            report.problems += [f"its table {table} is gone" for table in sorted(set(schema.tables) - tables)]
        if report.problems:
            return report
        rows = read_rows(db, schema.rows, tables, schema.tallies)
    except psycopg.Error as error:
        report.problems.append(f"PostgreSQL says {str(error).strip()}")
        return report
    report.records, report.unreadable, report.names = rows.counts, rows.bad, rows.names
    return report


def _version(conn: Any, tables: set[str]) -> int | None:
    if VERSION_TABLE not in tables:
        return None
    row = conn.execute(f"SELECT max(version) FROM {VERSION_TABLE}").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def advice(report: Report, url: str) -> str:
    """The ways out of what is wrong with one schema, with the commands to type."""
    name = report.path.name
    if any("newer pier" in problem for problem in report.problems):
        return (f"{name} is a newer pier's: run that pier (or a newer one) on {shown(url)}; this one leaves it as "
                "it is.")
    if report.problems:
        return (f"pier does not start on {name} as it is. Either restore it from your dump (pg_restore), or drop it "
                f"to start it again with {report.without}: DROP SCHEMA {name} CASCADE (a gateway makes it again).")
    if report.unreadable:
        return (f"{name} is sound; only the rows above do not read. {report.mend}, or restore the database from "
                "your dump (pg_restore).")
    return ""

