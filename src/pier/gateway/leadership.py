"""Which gateway leads: the one that runs the loops (the reconciler, autoscaling and alarms, the async queue's
dispatcher, transform jobs, deployments' steps). Every gateway serves the whole API; only the leader changes copies.

With the state folder there is one gateway (the folder's lock), and it leads. With the state in PostgreSQL
(`--state-url`) several gateways may share it, and the leader is the one holding a session-level advisory lock on a
connection of its own (`Leadership`):

- A gateway that takes the lock waits `grace_s` before it leads, and one that holds it checks its connection every
  `renew_s`; when a check fails or takes longer than `deadline_s`, it stops leading at once. The database frees the
  lock only when the holder's connection is gone, and the holder has stopped by `deadline_s` after its last good
  check, so with `grace_s` > `deadline_s` the old leader has stopped before the new one starts (no split brain,
  whatever the clocks say: each side counts only its own time).
- A killed leader's connection closes with its process, the lock is free at once, and a follower that polls every
  `renew_s` leads within about `renew_s + grace_s` (2 s + 3 s by default; the issue asks for 10).
- Who leads is a row the leader writes when it takes over (`pier_leader.leader`: holder, since, term); `/pier` shows
  it, read by every gateway on each poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from pier.state_folder.postgres import Postgres

log = logging.getLogger("pier.gateway")

LOCK_KEY = "pier leader"  # hashed to the advisory lock's number
SCHEMA = "pier_leader"


def holder_name(port: int | None = None) -> str:
    """How a gateway names itself to the others: its host, port and process."""
    where = f"{socket.gethostname()}:{port}" if port else socket.gethostname()
    return f"{where} (pid {os.getpid()}, {secrets.token_hex(3)})"  # two in one process differ too


@dataclass(frozen=True)
class LeaderStanding:
    """What `/pier` says of leadership."""

    leading: bool
    leader: str | None  # who leads, as it names itself; None: nobody yet (or not known)
    since: float | None = None
    term: int | None = None

    def as_json(self, me: str) -> dict[str, Any]:
        return {"role": "leader" if self.leading else "follower", "gateway": me, "leader": self.leader,
                "leader_since": self.since, "term": self.term}


class Leadership:
    """Leadership in one PostgreSQL database (`url`), or, without one, always this gateway's."""

    def __init__(self, url: str | None, me: str, *, renew_s: float = 1.0, deadline_s: float = 2.0,
                 grace_s: float = 3.0) -> None:
        if url is not None and grace_s <= deadline_s:
            raise ValueError("the grace before leading must be longer than the holder's deadline")
        self.url = url
        self.me = me
        self.renew_s, self.deadline_s, self.grace_s = renew_s, deadline_s, grace_s
        self.role = LeaderStanding(leading=url is None, leader=me if url is None else None)
        self._conn: Any = None

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Runs `lead()` while this gateway leads, and cancels it as soon as it does not; until cancelled."""
        if self.url is None:
            await lead()
            return
        try:
            while True:
                if await self._call(self._take):
                    await self._lead(lead)
                    await asyncio.sleep(self.grace_s)  # one that lost its lease lets the others take it first
                await asyncio.sleep(self.renew_s)
        finally:
            self._drop()

    async def _lead(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        await asyncio.sleep(self.grace_s)  # the holder before us has stopped by now (see the module's docstring)
        if not await self._call(self._renew):
            return
        self.role = await self._call(self._claim) or self.role
        log.info("this gateway leads (term %s): it runs the reconciler, autoscaling, the async queue and transform "
                 "jobs", self.role.term)
        task = asyncio.create_task(lead(), name="leading")
        try:
            while not task.done():
                await asyncio.sleep(self.renew_s)
                if not await self._call(self._renew):
                    log.error("this gateway lost its lease on the state database: it stops leading (another "
                              "gateway takes over) and goes on serving as a follower")
                    break
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.role = LeaderStanding(leading=False, leader=None)
            self._drop()  # frees the lock if the server still holds it for us

    async def _call(self, step: Callable[[], Any]) -> Any:
        """One step on the lease's connection, given up (None; the connection dropped) past the deadline."""
        try:
            return await asyncio.wait_for(asyncio.to_thread(step), self.deadline_s)
        except Exception as error:  # any failure of the database means: not leading
            log.debug("lease: %s", error)
            self._drop()
            return None

    def _connection(self) -> Any:
        if self._conn is None:
            assert self.url is not None
            self._conn = Postgres(self.url).connect()
            self._conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            self._conn.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.leader (id INTEGER PRIMARY KEY, holder TEXT "
                               "NOT NULL, since DOUBLE PRECISION NOT NULL, term BIGINT NOT NULL)")
        return self._conn

    def _take(self) -> bool:
        conn = self._connection()
        taken = bool(conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (LOCK_KEY,)).fetchone()[0])
        if not taken:
            row = conn.execute(f"SELECT holder, since, term FROM {SCHEMA}.leader WHERE id = 1").fetchone()
            self.role = LeaderStanding(False, *row) if row else LeaderStanding(False, None)
        return taken

    def _renew(self) -> bool:
        return bool(self._connection().execute("SELECT 1").fetchone()[0] == 1)

    def _claim(self) -> LeaderStanding:
        row = self._connection().execute(
            f"INSERT INTO {SCHEMA}.leader (id, holder, since, term) VALUES (1, %s, %s, 1) ON CONFLICT (id) DO "
            "UPDATE SET holder = excluded.holder, since = excluded.since, term = leader.term + 1 "
            "RETURNING holder, since, term", (self.me, time.time())).fetchone()
        return LeaderStanding(True, *row)

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
