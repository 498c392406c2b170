"""`transforms.sqlite3` in the state folder: every transform job, and the progress of the running ones, so a
gateway killed mid-job goes on where it was after a restart.

    jobs     one row a job: its record (request, status, times) as JSON
    objects  one row per input object of a job: its place, how many units and records it was cut into, and
             whether its output object is written
    outputs  one row per answered unit of an object not yet written: the unit's output, committed as it arrives

A unit is answered once (its row is the proof; a restart skips it), and an object's output is written whole from
its rows, then marked done and its rows dropped in one transaction. A kill between the write and the mark writes
the same bytes again on restart, so every record appears in the output exactly once. Opened, checked, backed up
and restored as every file of the state folder is (`pier.gateway.state_files`)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import pydantic

from pier.state_folder.database import BadRow, RowsRead, Schema, StoreFile
from pier.transform.job import JobRecord

FILE = "transforms.sqlite3"


@dataclass(frozen=True)
class ObjectRow:
    url: str
    relative: str
    position: int
    units: int | None  # None until the object is read and cut
    records: int | None
    done: bool


@dataclass(frozen=True)
class Progress:
    objects: int
    objects_done: int
    units: int  # of the objects cut so far
    units_done: int
    records: int  # of the objects cut so far
    records_done: int  # in objects whose output is written


def _rows(db: sqlite3.Connection) -> RowsRead:
    read = RowsRead()
    for name, body in db.execute("SELECT name, body FROM jobs"):
        read.names.add(f"transform job {name}")
        try:
            JobRecord.model_validate_json(body)
            read.counts["transform jobs"] = read.counts.get("transform jobs", 0) + 1
        except (pydantic.ValidationError, TypeError) as error:
            read.bad.append(BadRow("transform job", str(name), 0.0, str(error).splitlines()[0]))
    return read


SCHEMA = Schema(1, (
    "CREATE TABLE IF NOT EXISTS jobs (name TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS objects (job TEXT NOT NULL, url TEXT NOT NULL, relative TEXT NOT NULL, "
    "position INTEGER NOT NULL, units INTEGER, records INTEGER, done INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (job, url))",
    "CREATE TABLE IF NOT EXISTS outputs (job TEXT NOT NULL, url TEXT NOT NULL, unit INTEGER NOT NULL, "
    "body BLOB NOT NULL, PRIMARY KEY (job, url, unit))",
), ("jobs", "objects", "outputs"), "no transform jobs (running ones are lost: create them again)", _rows)


class TransformStore(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA

    # ---- jobs

    def insert(self, job: JobRecord) -> bool:
        with self._lock:
            cursor = self._db.execute("INSERT OR IGNORE INTO jobs (name, body) VALUES (?, ?)",
                                      (job.name.lower(), job.model_dump_json()))
            return cursor.rowcount == 1

    def put(self, job: JobRecord) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO jobs (name, body) VALUES (?, ?)",
                             (job.name.lower(), job.model_dump_json()))

    def get(self, name: str) -> JobRecord | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM jobs WHERE name = ?", (name.lower(),)).fetchone()
        return None if row is None else _job(row[0])

    def jobs(self) -> list[JobRecord]:
        with self._lock:
            bodies = [row[0] for row in self._db.execute("SELECT body FROM jobs")]
        return [job for job in map(_job, bodies) if job is not None]

    # ---- progress

    def add_objects(self, job: str, objects: list[tuple[str, str]]) -> None:
        """The job's inputs (url, relative name), once: a resumed job keeps the list it started with."""
        with self._lock, self._transaction():
            self._db.executemany(
                "INSERT OR IGNORE INTO objects (job, url, relative, position) VALUES (?, ?, ?, ?)",
                [(job.lower(), url, relative, i) for i, (url, relative) in enumerate(objects)])

    def objects(self, job: str) -> list[ObjectRow]:
        with self._lock:
            rows = self._db.execute("SELECT url, relative, position, units, records, done FROM objects "
                                    "WHERE job = ? ORDER BY position", (job.lower(),)).fetchall()
        return [ObjectRow(url, rel, pos, units, records, bool(done)) for url, rel, pos, units, records, done in rows]

    def cut(self, job: str, url: str, units: int, records: int) -> None:
        with self._lock:
            self._db.execute("UPDATE objects SET units = ?, records = ? WHERE job = ? AND url = ?",
                             (units, records, job.lower(), url))

    def answered(self, job: str, url: str) -> dict[int, bytes]:
        with self._lock:
            rows = self._db.execute("SELECT unit, body FROM outputs WHERE job = ? AND url = ?",
                                    (job.lower(), url)).fetchall()
        return {unit: bytes(body) for unit, body in rows}

    def answer(self, job: str, url: str, unit: int, body: bytes) -> None:
        """A unit's output, committed before anything depends on it; a second answer for it is ignored."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO outputs (job, url, unit, body) VALUES (?, ?, ?, ?)",
                             (job.lower(), url, unit, body))

    def written(self, job: str, url: str) -> None:
        """The object's output is in place: mark it and drop its units' rows together."""
        with self._lock, self._transaction():
            self._db.execute("UPDATE objects SET done = 1 WHERE job = ? AND url = ?", (job.lower(), url))
            self._db.execute("DELETE FROM outputs WHERE job = ? AND url = ?", (job.lower(), url))

    def progress(self, job: str) -> Progress:
        with self._lock:
            objects = self._db.execute(
                "SELECT count(*), coalesce(sum(done), 0), coalesce(sum(units), 0), "
                "coalesce(sum(CASE WHEN done THEN units ELSE 0 END), 0), coalesce(sum(records), 0), "
                "coalesce(sum(CASE WHEN done THEN records ELSE 0 END), 0) FROM objects WHERE job = ?",
                (job.lower(),)).fetchone()
            pending = self._db.execute("SELECT count(*) FROM outputs WHERE job = ?", (job.lower(),)).fetchone()[0]
        count, done, units, units_done, records, records_done = objects
        return Progress(count, done, units, units_done + pending, records, records_done)

    def forget_progress(self, job: str) -> None:
        """A finished job keeps its record; its rows of progress go."""
        with self._lock, self._transaction():
            self._db.execute("DELETE FROM outputs WHERE job = ?", (job.lower(),))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _transaction(self) -> Any:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT on the autocommit connection (ROLLBACK when the block raises)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self.db.execute("ROLLBACK" if kind else "COMMIT")


def _job(body: str) -> JobRecord | None:
    try:
        return JobRecord.model_validate_json(body)
    except (pydantic.ValidationError, json.JSONDecodeError):
        return None  # named by `pier state check`
