"""A client that hangs up cancels its work: the upstream request is closed, so the copy stops generating."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.types import Receive

from pier.errors import ClientGone

T = TypeVar("T")


async def unless_disconnected(work: Coroutine[Any, Any, T], receive: Receive) -> T:
    """Run `work`, cancelling it if the client disconnects first (then raise ClientGone).
    Call only after the request body has been read: the next message is then the disconnect."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)  # closes the upstream request now
    if task.cancelled():
        raise ClientGone()
    return task.result()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
