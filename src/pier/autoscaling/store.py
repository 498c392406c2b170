"""Autoscaling's own SQLite file in the state folder (`autoscaling.sqlite3`): scalable targets, policies and
alarms as the JSON their Describe operations answer with, the last scaling activities, and the metric history
(`history.py`). Separate from the control plane's `state.sqlite3`, so its frequent metric writes never contend
with the control plane's transactions and a damaged history never keeps endpoints from coming back."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

FILE = "autoscaling.sqlite3"
FILE_MODE = 0o600  # as the control plane's state: private to this user
MAX_ACTIVITIES = 2000  # the newest are kept, across all targets

Body = dict[str, Any]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, key TEXT NOT NULL COLLATE NOCASE, seq INTEGER NOT NULL,"
    " body TEXT NOT NULL, PRIMARY KEY (kind, key))",
    "CREATE TABLE IF NOT EXISTS activities (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,"
    " resource TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS datapoints (namespace TEXT NOT NULL, name TEXT NOT NULL, dims TEXT NOT NULL,"
    " ts INTEGER NOT NULL, count REAL NOT NULL, total REAL NOT NULL, low REAL NOT NULL, high REAL NOT NULL,"
    " unit TEXT NOT NULL, PRIMARY KEY (namespace, name, dims, ts))",
    "CREATE INDEX IF NOT EXISTS datapoints_ts ON datapoints (ts)",
)


class Store:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = path
        self.lock = threading.RLock()
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)
        path.chmod(FILE_MODE)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        for statement in SCHEMA:
            self.db.execute(statement)
        self._seq = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM records").fetchone()[0]

    @classmethod
    def open(cls, state_dir: Path) -> Store:
        return cls(state_dir / FILE)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    # ---- targets, policies, alarms: kind -> key -> body, in the order they were first put

    def get(self, kind: str, key: str) -> Body | None:
        with self.lock:
            row = self.db.execute("SELECT body FROM records WHERE kind = ? AND key = ?", (kind, key)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def put(self, kind: str, key: str, body: Body) -> None:
        with self.lock:
            self._seq += 1
            self.db.execute("INSERT INTO records (kind, key, seq, body) VALUES (?, ?, ?, ?) ON CONFLICT(kind, key) DO "
                            "UPDATE SET body = excluded.body", (kind, key, self._seq, json.dumps(body)))

    def delete(self, kind: str, key: str) -> bool:
        with self.lock:
            return self.db.execute("DELETE FROM records WHERE kind = ? AND key = ?", (kind, key)).rowcount == 1

    def all(self, kind: str) -> list[Body]:
        with self.lock:
            rows = self.db.execute("SELECT body FROM records WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
        return [dict(json.loads(row[0])) for row in rows]

    # ---- scaling activities, newest first

    def put_activity(self, activity: Body) -> None:
        with self.lock:
            self.db.execute("INSERT INTO activities (id, resource, body) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE "
                            "SET body = excluded.body",
                            (activity["ActivityId"], activity["ResourceId"], json.dumps(activity)))
            self.db.execute("DELETE FROM activities WHERE seq <= (SELECT MAX(seq) FROM activities) - ?",
                            (MAX_ACTIVITIES,))

    def activities(self, resource: str | None = None) -> list[Body]:
        query, args = "SELECT body FROM activities", tuple[str, ...]()
        if resource is not None:
            query, args = query + " WHERE resource = ?", (resource,)
        with self.lock:
            rows = self.db.execute(query + " ORDER BY seq DESC", args).fetchall()
        return [dict(json.loads(row[0])) for row in rows]

    def close(self) -> None:
        with self.lock:
            self.db.close()
