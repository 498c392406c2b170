"""The asynchronous inference queue in the state folder (`async.sqlite3`) or the state database: every request
InvokeEndpointAsync accepted and has not finished, so a restarted gateway, or a new leader, runs what was waiting or
running when the last one stopped.

A request is written before its 202 is sent. A dispatcher takes it with its own claim (a token per lead: a new
leader's differs from the old one's), and every later change of the row is made only under that claim and state, in
the database: a leader that lost its lease (or was stopped) while the request ran cannot mark it answered, fail it
or release it once the next one has taken it. It is marked answered once its answer is written, and removed by the
one run that then sends its notification. A request that was running when its leader stopped waits again, keeping
the claim it ran under as the mark that it ran (`Waiting.ran`): before it runs again its answer is looked for
(`takeover.py`). Opened, checked, backed up and restored as every file of the state folder is
(`pier.gateway.state_files`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from pier.state_folder.database import Schema
from pier.state_folder.rows import BadRow, Rows
from pier.state_folder.store import Driver, StoreFile

FILE = "async.sqlite3"
QUEUED, RUNNING, ANSWERED = "queued", "running", "answered"
STATES = (QUEUED, RUNNING, ANSWERED)


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
    kms_key: str | None = None  # the config's OutputConfig.KmsKeyId: its answer and failure are encrypted with it

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


@dataclass(frozen=True)
class Waiting:
    """A queued request as dispatching sees it each tick: no payload."""

    id: str
    expires: float  # received + RequestTTLSeconds
    ran: bool = False  # it was running under an earlier claim: its answer may be written already


def read_request(row: tuple[Any, ...]) -> AsyncRequest | BadRow:
    """A stored row (id, state, request) as its request, or a BadRow saying why it is none."""
    if row[1] not in STATES:
        return BadRow("async request", str(row[0]), 0.0, f"its state {row[1]!r} is none of {', '.join(STATES)}")
    try:
        return AsyncRequest.from_json(str(row[2]))
    except (ValueError, TypeError) as error:
        return BadRow("async request", str(row[0]), 0.0, f"its request does not read ({error})")


def _read(row: tuple[Any, ...] | None) -> AsyncRequest | None:
    """A stored row as its request, parsed once; None when there is none, it is answered or it does not read."""
    if row is None or row[1] not in (QUEUED, RUNNING):
        return None
    request = read_request(row)
    return None if isinstance(request, BadRow) else request


# Version 2: each row's claim (the run that holds it, or last held it). Its ALTER runs after the CREATE on a new
# file as on one of version 1, where it adds the column.
SCHEMA = Schema(2, ("CREATE TABLE IF NOT EXISTS requests (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, state TEXT "
                    "NOT NULL, received REAL NOT NULL, request TEXT NOT NULL)",
                    "ALTER TABLE requests ADD COLUMN claim TEXT"),
                ("requests",), "no queued asynchronous requests (those accepted before are lost: callers resend them)",
                (Rows("requests", "SELECT id, state, request FROM requests ORDER BY received", read_request,
                      lambda row: ("async request", str(row[0])), counted="async requests"),))


class AsyncQueue(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA
    MEND = "Delete the row (its caller resends the request), or let it fail"

    def __init__(self, path: Path, driver: Driver | None = None) -> None:
        super().__init__(path, driver)
        self._ttls: dict[str, float] = {}  # id -> RequestTTLSeconds, read from a row's JSON once

    def add(self, request: AsyncRequest) -> None:
        with self.lock:
            self.db.execute("INSERT INTO requests (id, endpoint, state, received, request) VALUES (?, ?, ?, ?, ?)",
                            (request.id, request.endpoint, QUEUED, request.received, request.to_json()))
            self._ttls[request.id] = request.ttl_s

    def pending(self, endpoint: str, limit: int = 1000) -> list[Waiting]:
        """Queued requests of `endpoint`, oldest first, without reading their rows' JSON (inline bodies of up to
        128 KB each: a thousand of them took seconds to read, every tick, on the event loop)."""
        with self.lock:
            rows = self.db.execute("SELECT id, received, claim FROM requests WHERE state = ? AND endpoint = ? "
                                   "ORDER BY received LIMIT ?", (QUEUED, endpoint, limit)).fetchall()
            found = []
            for id, received, claim in rows:
                ttl = self._ttls.get(id)
                if ttl is None:
                    ttl = self._ttl_of(id)
                if ttl is not None:  # a row that does not read is left for `pier state check` to name
                    found.append(Waiting(id, received + ttl, claim is not None))
            return found

    def read_ttls(self) -> None:
        """At start: every row's TTL read once, by SQLite (which lets the event loop run meanwhile), so the first
        ticks need not read a restarted gateway's queue whole."""
        with self.lock:
            rows = self.db.execute("SELECT id, json_extract(request, '$.ttl_s') FROM requests "
                                   "WHERE json_valid(request)").fetchall()
            self._ttls.update({id: float(ttl) for id, ttl in rows if isinstance(ttl, int | float)})

    def get(self, id: str) -> AsyncRequest | None:
        """The request whole, or None when it is gone or does not read."""
        with self.lock:
            row = self.db.execute("SELECT id, state, request FROM requests WHERE id = ?", (id,)).fetchone()
        return _read(row)

    def _ttl_of(self, id: str) -> float | None:
        """A row queued before this process (or by no `add` of it): its TTL, read once (the lock is held)."""
        request = _read(self.db.execute("SELECT id, state, request FROM requests WHERE id = ?", (id,)).fetchone())
        if request is None:
            return None
        self._ttls[id] = request.ttl_s
        return request.ttl_s

    def requeue_running(self) -> int:
        """At start: what was running when the last leader stopped waits again, its claim kept (it ran)."""
        with self.lock:
            return self.db.execute("UPDATE requests SET state = ? WHERE state = ?", (QUEUED, RUNNING)).rowcount

    def answered_before(self) -> list[AsyncRequest]:
        """At start: requests whose answer was written and recorded, not yet removed: their notification is unsent."""
        with self.lock:
            rows = self.db.execute("SELECT id, state, request FROM requests WHERE state = ? ORDER BY received",
                                   (ANSWERED,)).fetchall()
        return [request for row in rows if not isinstance(request := read_request(row), BadRow)]

    def start(self, id: str, claim: str) -> bool:
        """Marks a queued request running under `claim`; False when it was not queued (already taken, or gone)."""
        with self.lock:
            return self.db.execute("UPDATE requests SET state = ?, claim = ? WHERE id = ? AND state = ?",
                                   (RUNNING, claim, id, QUEUED)).rowcount == 1

    def answered(self, id: str, claim: str) -> bool:
        """Its answer is written: from now on it never runs again. False when `claim` no longer holds it (another
        run has taken it since, or it was released): that run records it."""
        with self.lock:
            return self.db.execute("UPDATE requests SET state = ? WHERE id = ? AND state = ? AND claim = ?",
                                   (ANSWERED, id, RUNNING, claim)).rowcount == 1

    def release(self, id: str, claim: str, ran: bool = True) -> None:
        """A running request waits again (its leader is stopping, or no copy could take it): only while `claim`
        holds it. `ran`: it may have got as far as writing its answer, so its claim is kept as the mark of that."""
        with self.lock:
            self.db.execute(f"UPDATE requests SET state = ?{'' if ran else ', claim = NULL'} WHERE id = ? AND "
                            "state = ? AND claim = ?", (QUEUED, id, RUNNING, claim))

    def failed(self, id: str, claim: str) -> bool:
        """A running request that failed (its failure written) leaves the queue; False when `claim` no longer holds
        it (its notification is then not this run's to send)."""
        return self._remove("state = ? AND claim = ?", (id, RUNNING, claim))

    def remove_answered(self, id: str) -> bool:
        """An answered request leaves the queue; True for the one call that removed it, which alone notifies."""
        return self._remove("state = ?", (id, ANSWERED))

    def _remove(self, where: str, args: tuple[str, ...]) -> bool:
        with self.lock:
            removed = self.db.execute(f"DELETE FROM requests WHERE id = ? AND {where}", args).rowcount == 1
            self._ttls.pop(args[0], None)
        return removed

    def waiting(self, endpoint: str | None = None, limit: int = 1000) -> list[AsyncRequest]:
        """Queued requests, oldest first (rows that do not read are left for `pier state check` to name)."""
        where, args = ("state = ?", [QUEUED]) if endpoint is None else ("state = ? AND endpoint = ?",
                                                                        [QUEUED, endpoint])
        with self.lock:
            rows = self.db.execute(f"SELECT id, state, request FROM requests WHERE {where} ORDER BY received "
                                   "LIMIT ?", (*args, limit)).fetchall()
        return [request for row in rows if not isinstance(request := read_request(row), BadRow)]

    def backlog(self) -> dict[str, tuple[int, int, float | None]]:
        """Per endpoint: (queued, running, when the oldest queued one was received)."""
        with self.lock:
            rows = self.db.execute("SELECT endpoint, state, COUNT(*), MIN(received) FROM requests GROUP BY endpoint, "
                                   "state").fetchall()
        found: dict[str, tuple[int, int, float | None]] = {}
        for endpoint, state, count, oldest in rows:
            queued, running, first = found.get(endpoint, (0, 0, None))
            if state == QUEUED:
                found[endpoint] = (queued + count, running, oldest)
            elif state == RUNNING:
                found[endpoint] = (queued, running + count, first)
        return found
