"""Autoscaling's own SQLite file in the state folder (`autoscaling.sqlite3`): scalable targets, policies and
alarms as the JSON their Describe operations answer with, the last scaling activities, and the metric history
(`history.py`). Separate from the control plane's `state.sqlite3`, so its frequent metric writes never contend
with the control plane's transactions.

It is opened, checked, backed up and restored as every store of the state folder is (`pier.state_folder.store`):
a damaged file is refused with its name and the fix, never replaced. One stored row that does not read
(not JSON, or without the members pier reads) is left out of what the Describe operations and the scaler see, logged
once and listed by `pier state check`; registering the same target (policy, alarm) again writes over it, and
deregistering (deleting) it removes it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pier.state_folder.database import Schema
from pier.state_folder.rows import BadRow, Rows, text
from pier.state_folder.store import Driver, StoreFile

log = logging.getLogger("pier.autoscaling")

FILE = "autoscaling.sqlite3"
MAX_ACTIVITIES = 2000  # the newest are kept, across all targets

Body = dict[str, Any]

# What each kind of record must hold for pier to use it: member -> its JSON type(s). A row without them is
# unreadable, not a KeyError on every Describe call.
_TEXT, _NUMBER = (str,), (int, float)
SHAPES: dict[str, dict[str, tuple[type, ...]]] = {
    "target": {"ServiceNamespace": _TEXT, "ResourceId": _TEXT, "ScalableDimension": _TEXT, "MinCapacity": _NUMBER,
               "MaxCapacity": _NUMBER, "ScalableTargetARN": _TEXT, "SuspendedState": (dict,)},
    "policy": {"PolicyName": _TEXT, "PolicyARN": _TEXT, "ResourceId": _TEXT, "ScalableDimension": _TEXT,
               "PolicyType": _TEXT},
    "scheduled": {"ScheduledActionName": _TEXT, "ResourceId": _TEXT, "ScalableDimension": _TEXT,
                  "Schedule": _TEXT, "CreationTime": _NUMBER},
    "alarm": {"AlarmName": _TEXT, "StateValue": _TEXT},
    "activity": {"ActivityId": _TEXT, "ResourceId": _TEXT, "StatusCode": _TEXT},
}
KIND_NAMES = {"target": "scalable target", "policy": "scaling policy", "scheduled": "scheduled action",
              "alarm": "alarm", "scheduled-run": "scheduled action's last run", "activity": "scaling activity"}

STATEMENTS = (
    "CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, key TEXT NOT NULL COLLATE NOCASE, seq INTEGER NOT NULL,"
    " body TEXT NOT NULL, PRIMARY KEY (kind, key))",
    "CREATE TABLE IF NOT EXISTS activities (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,"
    " resource TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS datapoints (namespace TEXT NOT NULL, name TEXT NOT NULL, dims TEXT NOT NULL,"
    " ts INTEGER NOT NULL, count REAL NOT NULL, total REAL NOT NULL, low REAL NOT NULL, high REAL NOT NULL,"
    " unit TEXT NOT NULL, PRIMARY KEY (namespace, name, dims, ts))",
    "CREATE INDEX IF NOT EXISTS datapoints_ts ON datapoints (ts)",
)


def read_body(kind: str, key: str, body: Any) -> Body | BadRow:
    """One stored row's JSON as the record pier uses, or a BadRow saying why it is not one."""
    label = KIND_NAMES.get(kind, kind)
    raw = body.encode() if isinstance(body, str) else body
    if not isinstance(raw, bytes):
        return BadRow(label, key, 0.0, f"its stored body is {type(body).__name__}, not JSON")
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as error:
        return BadRow(label, key, 0.0, f"its stored body is not JSON ({error})")
    if not isinstance(parsed, dict):
        return BadRow(label, key, 0.0, f"its stored JSON is {type(parsed).__name__}, not an object")
    wrong = [member for member, types in SHAPES.get(kind, {}).items()
             if not isinstance(parsed.get(member), types) or isinstance(parsed.get(member), bool)]
    if wrong:
        return BadRow(label, key, 0.0, f"its stored JSON lacks {', '.join(wrong)} (or holds the wrong type)", parsed)
    return parsed


def _record(row: tuple[Any, ...]) -> Body | BadRow:
    return read_body(str(row[0]), text(row[1]), row[2])


def _activity(row: tuple[Any, ...]) -> Body | BadRow:
    return read_body("activity", text(row[0]), row[1])


# Every record and activity read as the gateway reads them (the metric history is numbers SQLite keeps: counted).
SCHEMA = Schema(1, STATEMENTS, ("records", "activities", "datapoints"),
                "no scalable targets, scaling policies, alarms or metric history",
                (Rows("records", "SELECT kind, CAST(key AS BLOB), CAST(body AS BLOB) FROM records ORDER BY seq",
                      _record, lambda row: (KIND_NAMES.get(str(row[0]), str(row[0])), text(row[1]))),
                 Rows("activities", "SELECT CAST(id AS BLOB), CAST(body AS BLOB) FROM activities ORDER BY seq",
                      _activity, lambda row: (KIND_NAMES["activity"], text(row[0])))),
                (("datapoints", "datapoints"),))


class Store(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA
    MEND = "Register (put) each again, or deregister (delete) it"

    def __init__(self, path: Path, driver: Driver | None = None) -> None:
        super().__init__(path, driver)  # StateDamaged when it cannot be read: never replaced
        self._logged: set[tuple[str, str, str]] = set()  # unreadable rows already logged
    # ---- targets, policies, alarms: kind -> key -> body, in the order they were first put

    def get(self, kind: str, key: str) -> Body | None:
        """The record, or None when there is none or its row does not read (putting it again writes over it)."""
        with self.lock:
            row = self.db.execute("SELECT CAST(body AS BLOB) FROM records WHERE kind = ? AND key = ?",
                                  (kind, key)).fetchone()
        return None if row is None else self._readable(kind, key, row[0])

    def put(self, kind: str, key: str, body: Body) -> None:
        # The next place is the database's, not this process's count: another gateway may put records too.
        with self.lock:
            self.db.execute("INSERT INTO records (kind, key, seq, body) VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) "
                            "+ 1 FROM records), ?) ON CONFLICT(kind, key) DO UPDATE SET body = excluded.body",
                            (kind, key, json.dumps(body)))

    def delete(self, kind: str, key: str) -> bool:
        with self.lock:
            return self.db.execute("DELETE FROM records WHERE kind = ? AND key = ?", (kind, key)).rowcount == 1

    def all(self, kind: str) -> list[Body]:
        """Every record of `kind` that reads, in the order they were first put."""
        return [body for _, body in self.numbered(kind)]

    def numbered(self, kind: str) -> list[tuple[int, Body]]:
        """`all(kind)` with each record's place in that order (never reused), which a page's NextToken names so
        the next page starts after it whatever was put or deleted in between."""
        with self.lock:
            rows = self.db.execute("SELECT seq, CAST(key AS BLOB), CAST(body AS BLOB) FROM records WHERE kind = ? "
                                   "ORDER BY seq", (kind,)).fetchall()
        return [(seq, body) for seq, key, raw in rows if (body := self._readable(kind, text(key), raw)) is not None]

    def _readable(self, kind: str, key: str, raw: Any) -> Body | None:
        found = read_body(kind, key, raw)
        if not isinstance(found, BadRow):
            return found
        if (kind, key, found.reason) not in self._logged:  # once, not on every call
            self._logged.add((kind, key, found.reason))
            log.warning("%s: skipping the %s %s: %s. Put it again, delete it, or restore a backup (pier state "
                        "restore).", self.path, found.kind, key, found.reason)
        return None

    # ---- scaling activities, newest first

    def put_activity(self, activity: Body) -> None:
        with self.lock:
            self.db.execute("INSERT INTO activities (id, resource, body) VALUES (?, ?, ?) ON CONFLICT(id) DO UPDATE "
                            "SET body = excluded.body",
                            (activity["ActivityId"], activity["ResourceId"], json.dumps(activity)))
            self.db.execute("DELETE FROM activities WHERE seq <= (SELECT MAX(seq) FROM activities) - ?",
                            (MAX_ACTIVITIES,))

    def activities(self, resource: str | None = None) -> list[Body]:
        return [body for _, body in self.numbered_activities(resource)]

    def numbered_activities(self, resource: str | None = None) -> list[tuple[int, Body]]:
        """The activities, newest first, each with its place (never reused; larger is newer)."""
        query, args = "SELECT seq, CAST(id AS BLOB), CAST(body AS BLOB) FROM activities", tuple[str, ...]()
        if resource is not None:
            query, args = query + " WHERE resource = ?", (resource,)
        with self.lock:
            rows = self.db.execute(query + " ORDER BY seq DESC", args).fetchall()
        return [(seq, body) for seq, key, raw in rows
                if (body := self._readable("activity", text(key), raw)) is not None]
