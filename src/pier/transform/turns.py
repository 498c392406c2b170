"""A job's turns on its copies: each ready copy takes as many records at once as its concurrency (its engine's
parallel sequences), and a sender waits for the first free one, so every parallel sequence of every copy stays
busy while records remain. The job runs more senders than turns, so a record is waiting for every turn that
frees: the turn goes to it at once, while the sender that freed it stores its answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from pier.backends.base import CopyState, CopyStatus
from pier.channel.concurrency import DEFAULT_PARALLEL

POLL_S = 0.25  # how often a waiting sender looks for copies that became ready


class CopiesFailed(RuntimeError):
    """Every copy of the job failed to start: the job fails with their words."""


@dataclass
class Turns:
    copies: Callable[[], list[CopyStatus]]  # the job's copies as the backend reports them
    limit: int | None = None  # records in flight at most over all copies (MaxConcurrentTransforms)
    problem: Callable[[], str | None] = lambda: None  # why the reconciler could not place the job's copies
    busy: dict[str, int] = field(default_factory=dict)  # copy id -> records in flight there
    _freed: asyncio.Event = field(default_factory=asyncio.Event)

    async def take(self, avoid: str = "") -> CopyStatus:
        """A ready copy with a free turn (the least busy; `avoid` only when no other has one)."""
        while True:
            copy = self.free(avoid)
            if copy is not None:
                self.busy[copy.copy_id] = self.busy.get(copy.copy_id, 0) + 1
                return copy
            self._freed.clear()
            # asyncio.wait, not wait_for: Python 3.11's wait_for can swallow a cancellation (a stopped job's
            # senders would never end).
            waiter = asyncio.ensure_future(self._freed.wait())
            try:
                await asyncio.wait({waiter}, timeout=POLL_S)
            finally:
                waiter.cancel()

    def give(self, copy: CopyStatus) -> None:
        self.busy[copy.copy_id] = max(0, self.busy.get(copy.copy_id, 0) - 1)
        self._freed.set()

    @property
    def in_flight(self) -> int:
        return sum(self.busy.values())

    def ready(self) -> list[CopyStatus]:
        return [c for c in self.copies() if c.state is CopyState.READY and c.url]

    def free(self, avoid: str) -> CopyStatus | None:
        statuses = self.copies()
        if statuses and all(c.state is CopyState.FAILED for c in statuses):
            raise CopiesFailed("; ".join(dict.fromkeys(c.message or "it failed" for c in statuses)))
        if not statuses and (why := self.problem()):  # none placed, and none will be: the job would wait for ever
            raise CopiesFailed(f"The job's copies cannot be placed: {why}")
        if self.limit is not None and self.in_flight >= self.limit:
            return None
        ready = [c for c in statuses if c.state is CopyState.READY and c.url
                 and self.busy.get(c.copy_id, 0) < (c.concurrency or DEFAULT_PARALLEL)]
        ready.sort(key=lambda c: (c.copy_id == avoid, self.busy.get(c.copy_id, 0)))
        return ready[0] if ready else None
