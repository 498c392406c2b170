"""The open sessions in the state folder (`sessions.sqlite3`), so a restarted gateway still routes each session to
its copy (copy ids follow from what a copy is, so the restarted copy has the same id).

One row per session, written when it opens, moves to another copy or ends; a use does not write (the order of
least recent use is the gateway's memory's; after a restart, the order sessions were opened in). Opened, checked,
backed up and restored as every file of the state folder is (`pier.gateway.state_files`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pier.state_folder.database import Schema
from pier.state_folder.errors import StateDamaged, StateError
from pier.state_folder.rows import BadRow, Rows
from pier.state_folder.store import Driver, StoreFile

log = logging.getLogger(__name__)

FILE = "sessions.sqlite3"
COLUMNS = "id, endpoint, component, copy_id, expires"


Session = tuple[str, str, str, str, float]  # id, endpoint, component, copy id, expiry


def read_session(row: tuple[Any, ...]) -> Session | BadRow:
    """A stored row as the session it is, or a BadRow saying why not."""
    if not all(isinstance(value, str) and value for value in row[:4]):
        return BadRow("session", str(row[0]), 0.0, "its id, endpoint, component and copy are not all text")
    if not isinstance(row[4], int | float):
        return BadRow("session", str(row[0]), 0.0, "its expiry is not a number")
    return row[0], row[1], row[2], row[3], float(row[4])


SCHEMA = Schema(1, ("CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, component "
                    "TEXT NOT NULL, copy_id TEXT NOT NULL, expires REAL NOT NULL)",),
                ("sessions",), "no open sessions (clients open new ones)",
                (Rows("sessions", f"SELECT {COLUMNS} FROM sessions ORDER BY expires", read_session,
                      lambda row: ("session", str(row[0])), counted="sessions"),))


class SessionStore(StoreFile):
    FILE = FILE
    SCHEMA = SCHEMA
    MEND = "Clients open new sessions; the row goes once its session expires or is closed"

    @classmethod
    def for_gateway(cls, state_dir: Path, driver: Driver | None = None) -> SessionStore | None:
        return open_or_without(state_dir, driver)

    def load(self, now: float, limit: int) -> list[Session]:
        """The newest `limit` sessions not expired at `now`, oldest first (expired ones are removed; rows that do
        not read are left for `pier state check` to name)."""
        with self.lock:
            self.db.execute("DELETE FROM sessions WHERE typeof(expires) IN ('real', 'integer') AND expires <= ?",
                            (now,))
            rows = self.db.execute(f"SELECT {COLUMNS} FROM sessions WHERE expires > ? ORDER BY expires DESC LIMIT ?",
                                   (now, limit)).fetchall()
        return [session for row in reversed(rows) if not isinstance(session := read_session(row), BadRow)]

    def put(self, id: str, endpoint: str, component: str, copy_id: str, expires: float) -> None:
        with self.lock:
            self.db.execute(f"INSERT INTO sessions ({COLUMNS}) VALUES (?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                            "endpoint = excluded.endpoint, component = excluded.component, "
                            "copy_id = excluded.copy_id, expires = excluded.expires",
                            (id, endpoint, component, copy_id, expires))

    def delete(self, ids: Iterable[str]) -> None:
        with self.lock:
            self.db.executemany("DELETE FROM sessions WHERE id = ?", [(i,) for i in ids])


def open_or_without(state_dir: Path, driver: Driver | None = None) -> SessionStore | None:
    """The store, or None when its file cannot be used: the gateway then serves without it (sessions live in its
    memory only), as they are a cache of 20 minutes that clients reopen, and says so. The file is left as it is."""
    try:
        return SessionStore.open(state_dir, driver)
    except StateError as error:
        path = state_dir / FILE
        why = error.problem if isinstance(error, StateDamaged) else error.message
        log.warning(
            "pier cannot use its state file %s (%s): serving without it. Stateful sessions work, but only in this "
            "gateway's memory: a restart forgets them (clients open new ones), and those open before this start "
            "are gone. To keep them across restarts again, stop the gateway, move the file aside (mv %s "
            "%s.damaged) or restore it (pier state restore --state-dir %s), and start it again.",
            path, why, path, path, state_dir)
        return None
