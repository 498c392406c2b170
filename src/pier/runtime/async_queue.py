"""The asynchronous inference queue in the state folder (`async.sqlite3`): every request InvokeEndpointAsync accepted
and has not finished, so a restarted gateway runs what was waiting or running when it stopped.

A request is written before its 202 is sent, and removed once its answer (or its failure) is written where the caller
looks for it. A request that was running when the gateway stopped runs again after the restart, unless its answer is
already at its OutputLocation (the name is fixed when it is accepted, so a rerun finds it: each answer is written
once). Opened, checked, backed up and restored as every file of the state folder is (`pier.gateway.state_files`).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import asdict, dataclass, fields
from typing import Any

from pier.state_folder.database import BadRow, RowsRead, Schema, StoreFile

FILE = "async.sqlite3"
QUEUED, RUNNING = "queued", "running"


@dataclass(frozen=True)
class AsyncRequest:
    """One accepted InvokeEndpointAsync call."""

    id: str  # pier's own key: the name of its answer (<id>.out) and failure (<id>-error.out)
    inference_id: str
    endpoint: str
    output_location: str
    failure_location: str
    received: float  # epoch seconds
    ttl_s: float  # RequestTTLSeconds: it fails as expired if it has not started by received + ttl_s
    timeout_s: float  # InvocationTimeoutSeconds: the longest it may run
    input_location: str | None = None  # InputLocation, or
    body: str | None = None  # the inline Body (latin-1 text of its bytes)
    content_type: str | None = None
    accept: str | None = None
    custom_attributes: str | None = None

    @property
    def expires(self) -> float:
        return self.received + self.ttl_s

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> AsyncRequest:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _rows(db: sqlite3.Connection) -> RowsRead:
    read = RowsRead()
    for row in db.execute("SELECT id, state, request FROM requests ORDER BY received"):
        read.names.add(f"async request {row[0]}")
        problem = row_problem(row)
        if problem:
            read.bad.append(BadRow("async request", str(row[0]), 0.0, problem))
        else:
            read.counts["async requests"] = read.counts.get("async requests", 0) + 1
    return read


def row_problem(row: tuple[Any, ...]) -> str:
    """Why a stored row is no request ("" when it is one)."""
    if row[1] not in (QUEUED, RUNNING):
        return f"its state {row[1]!r} is neither {QUEUED} nor {RUNNING}"
    try:
        AsyncRequest.from_json(str(row[2]))
    except (ValueError, TypeError) as error:
        return f"its request does not read ({error})"
    return ""


SCHEMA = Schema(1, ("CREATE TABLE IF NOT EXISTS requests (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, state TEXT "
                    "NOT NULL, received REAL NOT NULL, request TEXT NOT NULL)",),
                ("requests",), "no queued asynchronous requests (those accepted before are lost: callers resend them)",
                _rows)


class AsyncQueue(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA

    def add(self, request: AsyncRequest) -> None:
        with self._lock:
            self._db.execute("INSERT INTO requests (id, endpoint, state, received, request) VALUES (?, ?, ?, ?, ?)",
                             (request.id, request.endpoint, QUEUED, request.received, request.to_json()))

    def requeue_running(self) -> int:
        """At start: what was running when the gateway stopped waits again (it is rerun unless its answer is there)."""
        with self._lock:
            return self._db.execute("UPDATE requests SET state = ? WHERE state = ?", (QUEUED, RUNNING)).rowcount

    def start(self, id: str) -> bool:
        """Marks a queued request running; False when it was not queued (already taken, or gone)."""
        with self._lock:
            return self._db.execute("UPDATE requests SET state = ? WHERE id = ? AND state = ?",
                                    (RUNNING, id, QUEUED)).rowcount == 1

    def release(self, id: str) -> None:
        """A running request waits again (the gateway is stopping, or no copy could take it)."""
        with self._lock:
            self._db.execute("UPDATE requests SET state = ? WHERE id = ?", (QUEUED, id))

    def finish(self, id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM requests WHERE id = ?", (id,))

    def waiting(self, endpoint: str | None = None, limit: int = 1000) -> list[AsyncRequest]:
        """Queued requests, oldest first (rows that do not read are left for `pier state check` to name)."""
        where, args = ("state = ?", [QUEUED]) if endpoint is None else ("state = ? AND endpoint = ?",
                                                                        [QUEUED, endpoint])
        with self._lock:
            rows = self._db.execute(f"SELECT id, state, request FROM requests WHERE {where} ORDER BY received "
                                    "LIMIT ?", (*args, limit)).fetchall()
        return [AsyncRequest.from_json(row[2]) for row in rows if not row_problem(row)]

    def backlog(self) -> dict[str, tuple[int, int, float | None]]:
        """Per endpoint: (queued, running, when the oldest queued one was received)."""
        with self._lock:
            rows = self._db.execute("SELECT endpoint, state, COUNT(*), MIN(received) FROM requests GROUP BY endpoint, "
                                    "state").fetchall()
        found: dict[str, tuple[int, int, float | None]] = {}
        for endpoint, state, count, oldest in rows:
            queued, running, first = found.get(endpoint, (0, 0, None))
            if state == QUEUED:
                found[endpoint] = (queued + count, running, oldest)
            elif state == RUNNING:
                found[endpoint] = (queued, running + count, first)
        return found

    def close(self) -> None:
        with self._lock:
            self._db.close()
