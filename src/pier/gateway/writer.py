"""The gateway's writer: one thread that runs the AWS APIs' blocking work (SQLite reads and writes of the control
plane's and autoscaling's stores, parsing and checking large bodies, CloudWatch's aggregation, the autoscaler's
tick), so the event loop only waits for it and keeps answering every other route (`/ping`, streams) meanwhile.

One thread, not a pool: calls run in the order they arrive, as they did on the loop, so a client's writes land in
the order it made them, and two operations never contend for the stores' locks. Work that must touch the loop's
own objects (an `asyncio.Event` that wakes the reconciler or the autoscaler) goes back through `soon()`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class Writer:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pier-writer")
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`work(*args, **kwargs)` on the writer thread, after every call made before it. A caller that is
        cancelled (its client left) stops waiting; the work still runs to its end, so a write is never half done."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        return await loop.run_in_executor(self._pool, lambda: work(*args, **kwargs))

    def soon(self, action: Callable[[], None]) -> Callable[[], None]:
        """`action` made safe to call from the writer thread: there it is handed to the loop; on the loop (or
        before the loop has used the writer) it runs at once."""

        def call() -> None:
            loop = self._loop
            if loop is None or loop.is_closed() or _running() is loop:
                action()
            else:
                loop.call_soon_threadsafe(action)

        return call

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
