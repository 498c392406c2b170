"""A job's turns: at most MaxConcurrentTransforms records in flight over all its copies, and whether its copies
can take records at all. Which copy takes a record, and how many each takes at once (its concurrency: its engine's
parallel sequences), is the runtime's attempt loop's (pier.runtime.attempts), as for every other request; the job
runs more senders than its copies take, so a record is waiting for every turn that frees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from pier.backends.base import CopyState, CopyStatus


class CopiesFailed(RuntimeError):
    """Every copy of the job failed to start: the job fails with their words."""


@dataclass
class Turns:
    copies: Callable[[], list[CopyStatus]]  # the job's copies as the backend reports them
    limit: int | None = None  # records in flight at most over all copies (MaxConcurrentTransforms)
    problem: Callable[[], str | None] = lambda: None  # why the reconciler could not place the job's copies
    in_flight: int = 0  # records sent and not answered yet
    _room: asyncio.Semaphore | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.limit is not None:
            self._room = asyncio.Semaphore(self.limit)

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """One record in flight, once fewer than the limit are."""
        if self._room is not None:
            await self._room.acquire()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            if self._room is not None:
                self._room.release()

    def ready(self) -> list[CopyStatus]:
        return [c for c in self.copies() if c.state is CopyState.READY and c.url]

    def check(self) -> list[CopyStatus]:
        """The job's copies now; CopiesFailed when none will ever take a record."""
        statuses = self.copies()
        if statuses and all(c.state is CopyState.FAILED for c in statuses):
            raise CopiesFailed("; ".join(dict.fromkeys(c.message or "it failed" for c in statuses)))
        if not statuses and (why := self.problem()):  # none placed, and none will be: the job would wait for ever
            raise CopiesFailed(f"The job's copies cannot be placed: {why}")
        return statuses
