"""`transforms.sqlite3` in the state folder: every transform job, and the progress of the running ones, so a
gateway killed mid-job goes on where it was after a restart.

    jobs     one row a job: its record (request, status, times) as JSON
    objects  one row per input object of a job: its place, how many units and records it was cut into, and
             whether its output object is written
    outputs  one row per answered unit of an object not yet written: the unit's output, committed as it arrives

A unit is answered once (its row is the proof; a restart skips it), and an object's output is written whole from
its rows, then marked done and its rows dropped in one transaction. The output is written owned by its job's input
object (`pier.storage.write_once`): after a kill between the write and the mark, the gateway that resumes the job
(restarted, or the new leader) finds it written and only marks it, so every output is written once and every record
appears in it exactly once. Opened, checked, backed up
and restored as every file of the state folder is (`pier.gateway.state_files`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic

from pier.state_folder.database import Schema
from pier.state_folder.rows import BadRow, Rows
from pier.state_folder.store import StoreFile
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
class JobProgress:
    objects: int
    objects_done: int
    units: int  # of the objects cut so far
    units_done: int
    records: int  # of the objects cut so far
    records_done: int  # in objects whose output is written


def read_job(row: tuple[Any, ...]) -> JobRecord | BadRow:
    """A stored row (name, body) as its job, or a BadRow saying why it is none."""
    try:
        return JobRecord.model_validate_json(row[1])
    except (pydantic.ValidationError, TypeError, ValueError) as error:
        return BadRow("transform job", str(row[0]), 0.0, str(error).splitlines()[0])


SCHEMA = Schema(1, (
    "CREATE TABLE IF NOT EXISTS jobs (name TEXT PRIMARY KEY, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS objects (job TEXT NOT NULL, url TEXT NOT NULL, relative TEXT NOT NULL, "
    "position INTEGER NOT NULL, units INTEGER, records INTEGER, done INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (job, url))",
    "CREATE TABLE IF NOT EXISTS outputs (job TEXT NOT NULL, url TEXT NOT NULL, unit INTEGER NOT NULL, "
    "body BLOB NOT NULL, PRIMARY KEY (job, url, unit))",
), ("jobs", "objects", "outputs"), "no transform jobs (running ones are lost: create them again)",
    (Rows("jobs", "SELECT name, body FROM jobs", read_job, lambda row: ("transform job", str(row[0])),
          counted="transform jobs"),))


class TransformStore(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA
    MEND = "Create the job again under another name"

    # ---- jobs

    def insert(self, job: JobRecord) -> bool:
        with self.lock:
            cursor = self.db.execute("INSERT INTO jobs (name, body) VALUES (?, ?) ON CONFLICT DO NOTHING",
                                     (job.name.lower(), job.model_dump_json()))
            return cursor.rowcount == 1

    def put(self, job: JobRecord) -> None:
        with self.lock:
            self.db.execute("INSERT INTO jobs (name, body) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                            "body = excluded.body",
                            (job.name.lower(), job.model_dump_json()))

    def get(self, name: str) -> JobRecord | None:
        with self.lock:
            row = self.db.execute("SELECT name, body FROM jobs WHERE name = ?", (name.lower(),)).fetchone()
        return None if row is None else _job(row)

    def jobs(self) -> list[JobRecord]:
        with self.lock:
            rows = self.db.execute("SELECT name, body FROM jobs").fetchall()
        return [job for job in map(_job, rows) if job is not None]

    # ---- progress

    def add_objects(self, job: str, objects: list[tuple[str, str]]) -> None:
        """The job's inputs (url, relative name), once: a resumed job keeps the list it started with."""
        with self.transaction():
            self.db.executemany(
                "INSERT INTO objects (job, url, relative, position) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(job.lower(), url, relative, i) for i, (url, relative) in enumerate(objects)])

    def objects(self, job: str) -> list[ObjectRow]:
        with self.lock:
            rows = self.db.execute("SELECT url, relative, position, units, records, done FROM objects "
                                   "WHERE job = ? ORDER BY position", (job.lower(),)).fetchall()
        return [ObjectRow(url, rel, pos, units, records, bool(done)) for url, rel, pos, units, records, done in rows]

    def cut(self, job: str, url: str, units: int, records: int) -> None:
        with self.lock:
            self.db.execute("UPDATE objects SET units = ?, records = ? WHERE job = ? AND url = ?",
                            (units, records, job.lower(), url))

    def answered(self, job: str, url: str) -> dict[int, bytes]:
        with self.lock:
            rows = self.db.execute("SELECT unit, body FROM outputs WHERE job = ? AND url = ?",
                                   (job.lower(), url)).fetchall()
        return {unit: bytes(body) for unit, body in rows}

    def answer(self, job: str, url: str, unit: int, body: bytes) -> None:
        """A unit's output, committed before anything depends on it; a second answer for it is ignored."""
        with self.lock:
            self.db.execute("INSERT INTO outputs (job, url, unit, body) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                            (job.lower(), url, unit, body))

    def written(self, job: str, url: str) -> None:
        """The object's output is in place: mark it and drop its units' rows together."""
        with self.transaction():
            self.db.execute("UPDATE objects SET done = 1 WHERE job = ? AND url = ?", (job.lower(), url))
            self.db.execute("DELETE FROM outputs WHERE job = ? AND url = ?", (job.lower(), url))

    def progress(self, job: str) -> JobProgress:
        with self.lock:
            objects = self.db.execute(
                "SELECT count(*), coalesce(sum(done), 0), coalesce(sum(units), 0), "
                "coalesce(sum(CASE WHEN done <> 0 THEN units ELSE 0 END), 0), coalesce(sum(records), 0), "
                "coalesce(sum(CASE WHEN done <> 0 THEN records ELSE 0 END), 0) FROM objects WHERE job = ?",
                (job.lower(),)).fetchone()
            pending = self.db.execute("SELECT count(*) FROM outputs WHERE job = ?", (job.lower(),)).fetchone()[0]
        count, done, units, units_done, records, records_done = objects
        return JobProgress(count, done, units, units_done + pending, records, records_done)

    def forget_progress(self, job: str) -> None:
        """A finished job keeps its record; its rows of progress go."""
        with self.transaction():
            self.db.execute("DELETE FROM outputs WHERE job = ?", (job.lower(),))


def _job(row: tuple[Any, ...]) -> JobRecord | None:
    job = read_job(row)
    return None if isinstance(job, BadRow) else job  # a row that does not read is named by `pier state check`
