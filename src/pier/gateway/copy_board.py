"""The copies every gateway on one state database routes to (`--state-url`): the leader, whose reconciler starts and
watches them, publishes what it sees of them to the database each second (`CopyBoard.publish`: each copy's
workload, state, URL, secret and concurrency as its router sees them, and what `/pier/copies` lists of it), and a
follower routes by that table (`CopyBoard.copies`), so an endpoint answers through every gateway, not only the one
that started its copies, and lists the leader's copies as the leader does (`CopyBoard.listed`,
gateway/copy_view.py).

- A copy's URL must be one the followers reach: the local backend's copies listen on 127.0.0.1, so followers on
  the leader's host reach them (docs/state.md says what this means for gateways on several hosts).
- The table holds each copy's secret (what the gateway sends in X-Pier-Copy-Secret): whoever reads the database
  can call the copies directly, as whoever reads it can read the keys' secrets.
- A follower reads the table at most every `REREAD_S`; between a change and its next read it routes as before
  (a copy gone meanwhile fails that request, as a copy dying under the leader would). A workload it has no ready
  copy of is read again within `MISS_REREAD_S`: the leader publishes a copy ready before it stores what sends
  traffic to it (InService, a deployment's next step; the reconciler's `publish`), so a follower that reads that
  record finds the copy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

from pier.backends.base import CopyState, CopyStatus
from pier.control.workload import Workload
from pier.gateway.listed_copy import ListedCopy, placement
from pier.state_folder.database import Schema
from pier.state_folder.errors import StateUnavailable
from pier.state_folder.store import StoreFile

log = logging.getLogger("pier.gateway")

REREAD_S = 0.5
MISS_REREAD_S = 0.05
PUBLISH_S = 1.0
_FIELDS = ("copy_id", "component", "url", "message", "restarts", "concurrency")  # as routed


def as_row(copy: ListedCopy, now: float) -> tuple[str, str, str, float]:
    """(copy id, workload, the copy as JSON, when): the status as routed at the top (what every pier since the
    board routes by), what `/pier/copies` lists of it under "listed" (a pier before it reads no more than it did)."""
    routed, status = copy.routed, copy.status
    body: dict[str, Any] = {name: getattr(routed, name) for name in _FIELDS}
    body["state"] = routed.state.value
    body["secret"] = routed.secret
    body["listed"] = {"state": status.state.value, "message": status.message, "pid": status.pid,
                      "kernels": status.kernels, "placement": dict(copy.placement), "log_file": copy.log_file,
                      "owner": copy.owner}
    return routed.copy_id, routed.component, json.dumps(body), now


def from_row(text: str) -> ListedCopy:
    body: dict[str, Any] = json.loads(text)
    listed: dict[str, Any] = body.get("listed") or {}  # a row of a leader before it: listed as routed
    routed = CopyStatus(body["copy_id"], body["component"], CopyState(body["state"]), url=body["url"],
                        message=body["message"], restarts=body["restarts"], pid=listed.get("pid"),
                        secret=body["secret"], concurrency=body["concurrency"], kernels=listed.get("kernels"))
    status = dataclasses.replace(routed, state=CopyState(listed.get("state", routed.state.value)),
                                 message=listed.get("message", routed.message))
    return ListedCopy(status, routed, listed.get("placement") or placement(None), listed.get("log_file"),
                      listed.get("owner"))


class CopyBoard(StoreFile):
    """Kept only in a database: a gateway alone on its folder routes to its own copies."""

    FILE = "copies.sqlite3"  # names the schema, pier_copies
    SCHEMA = Schema(1, ("CREATE TABLE IF NOT EXISTS copies (copy_id TEXT PRIMARY KEY, workload TEXT NOT NULL, "
                        "status TEXT NOT NULL, published REAL NOT NULL)",),
                    ("copies",), "no copies listed (the leader lists them again within a second)")
    MEND = "Nothing to mend: the leader writes the table again each second"

    _read_at = -math.inf
    _seen: tuple[ListedCopy, ...] = ()

    def publish(self, copies: Iterable[ListedCopy]) -> None:
        """The leader's copies, in place of what was published before (one transaction: a follower reads the old
        list or the new one)."""
        now = time.time()
        rows = [as_row(copy, now) for copy in copies]
        with self.transaction() as db:
            db.execute("DELETE FROM copies")
            if rows:
                db.executemany("INSERT INTO copies (copy_id, workload, status, published) VALUES (?, ?, ?, ?)", rows)

    def copies(self, workload: Workload) -> list[CopyStatus]:
        """The copies of `workload` as the leader last published them (read again at most every REREAD_S; every
        MISS_REREAD_S while none of them is ready: the leader publishes a copy ready before it stores the status
        or deployment step that sends traffic to it, which this gateway reads fresh)."""
        ready = any(c.routed.component == workload and c.routed.state is CopyState.READY for c in self._seen)
        return [copy.routed for copy in self._read(REREAD_S if ready else MISS_REREAD_S)
                if copy.routed.component == workload]

    def listed(self) -> list[ListedCopy]:
        """Every copy as the leader last published it (read again at most every REREAD_S)."""
        return self._read(REREAD_S)

    def _read(self, every_s: float) -> list[ListedCopy]:
        now = time.monotonic()
        if now - self._read_at >= every_s:
            self._read_at = now
            try:
                with self.lock:
                    found = self.db.execute("SELECT status FROM copies ORDER BY copy_id").fetchall()
            except StateUnavailable as error:  # the database restarts: route as last read meanwhile
                log.warning("%s The copies as last read serve meanwhile.", error.message)
            else:
                self._seen = tuple(from_row(row[0]) for row in found)
        return list(self._seen)

    async def publishing(self, copies: Callable[[], list[ListedCopy]]) -> None:
        """While this gateway leads: `copies()` published every PUBLISH_S, until cancelled."""
        while True:
            await self.published(copies)
            await asyncio.sleep(PUBLISH_S)

    async def published(self, copies: Callable[[], list[ListedCopy]]) -> None:
        """`copies()` published now (the reconciler's, before it stores a status that sends traffic to them)."""
        try:
            await asyncio.to_thread(self.publish, copies())
        except Exception as error:  # the database away: the followers route by the last list meanwhile
            log.warning("could not publish the copies for the other gateways: %s", error)


def led_copies(statuses: Iterable[CopyStatus], copies_of: Callable[[Workload], list[CopyStatus]]
               ) -> list[CopyStatus]:
    """Every copy as the leader's router sees it (`copies_of`: draining ones shown not ready), workload by
    workload."""
    workloads = sorted({status.component for status in statuses})
    return [copy for workload in workloads for copy in copies_of(Workload(workload))]


def routed(board: CopyBoard | None, owning: Callable[[], bool], own: Callable[[Workload], list[CopyStatus]]
           ) -> Callable[[Workload], list[CopyStatus]]:
    """The copies a request is routed to: this gateway's own while it owns them (it leads and has taken them over;
    or alone), else the leader's as published. A new leader goes on routing by the published list while it takes
    the copies over: they serve meanwhile, and its own list is empty until it has."""
    if board is None:
        return own

    def copies(workload: Workload) -> list[CopyStatus]:
        return own(workload) if owning() else board.copies(workload)
    return copies

