"""How many requests one component takes at once, and how many may wait for a turn.

Each component has a concurrency limit (its ready copies times what one copy takes) and a bounded
FIFO queue in front of it. A request that finds the queue full is refused at once, and one that waits
longer than its timeout gives up: both raise `Throttled`, which SageMaker clients retry with backoff.
Waiting here instead of on a copy keeps the routing decision late, when it knows the most.
Everything runs on one event loop, so plain counters are enough.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from pier.runtime.errors import Throttled


@dataclass(frozen=True)
class AdmissionLimits:
    queue: int = 256  # requests that may wait per component; one more is refused at once
    timeout_s: float = 30.0  # the longest a request waits for a turn


class _Gate:
    def __init__(self) -> None:
        self.in_use = 0
        self.limit = 1
        self.waiters: deque[asyncio.Future[None]] = deque()

    def wake(self) -> None:
        """Hand free turns to the oldest waiters; a turn handed over is already counted as in use."""
        while self.waiters and self.in_use < self.limit:
            waiter = self.waiters.popleft()
            if not waiter.done():
                self.in_use += 1
                waiter.set_result(None)

    def release(self) -> None:
        self.in_use -= 1
        self.wake()


class Admission:
    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
        self._gates: dict[str, _Gate] = {}

    def in_use(self, component: str) -> int:
        gate = self._gates.get(component)
        return gate.in_use if gate else 0

    def waiting(self, component: str) -> int:
        gate = self._gates.get(component)
        return len(gate.waiters) if gate else 0

    @asynccontextmanager
    async def turn(self, component: str, limit: int, timeout_s: float | None = None) -> AsyncIterator[None]:
        """Hold one of `component`'s `limit` turns for the block. Waits at most `timeout_s` (default: the
        configured timeout) behind earlier requests; raises Throttled when the queue is full or time is up."""
        timeout_s = max(0.0, self.limits.timeout_s if timeout_s is None else timeout_s)
        gate = self._gates.setdefault(component, _Gate())
        gate.limit = max(1, limit)
        gate.wake()  # the limit may have grown since the last request (more copies became ready)
        try:
            await self._enter(component, gate, timeout_s)
            try:
                yield
            finally:
                gate.release()
        finally:
            if gate.in_use == 0 and not gate.waiters:
                self._gates.pop(component, None)

    async def _enter(self, component: str, gate: _Gate, timeout_s: float) -> None:
        if gate.in_use < gate.limit and not gate.waiters:
            gate.in_use += 1
            return
        if len(gate.waiters) >= self.limits.queue:
            raise Throttled(
                f"Inference component {component} is busy: {gate.in_use} requests are running and "
                f"{len(gate.waiters)} are waiting, the most it queues. Retry with backoff, add copies, or "
                "raise the queue limit."
            )
        waiter = asyncio.get_running_loop().create_future()
        gate.waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(waiter)
        except BaseException as error:
            self._abandon(gate, waiter)
            if isinstance(error, TimeoutError):
                raise Throttled(
                    f"Inference component {component} stayed busy: no turn freed up within {timeout_s:.1f} s "
                    f"({gate.in_use} requests running). Retry with backoff or add copies."
                ) from None
            raise

    @staticmethod
    def _abandon(gate: _Gate, waiter: asyncio.Future[None]) -> None:
        """A waiter that gives up (timeout or cancellation) leaves the queue; if a turn was handed to it
        at the same moment, the turn goes to the next in line."""
        if waiter.done() and not waiter.cancelled():
            gate.release()
        else:
            waiter.cancel()
            if waiter in gate.waiters:
                gate.waiters.remove(waiter)
