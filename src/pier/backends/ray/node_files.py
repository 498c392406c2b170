"""The gateway's files that copies read, on the nodes that cannot see them: a model's folder before its copy starts,
an adapter's GGUF when a request names it. A file goes through Ray's object store one chunk at a time into the
node's cache, once per node and version of the file (a file changed in place is a new version: its manifest's key
has its size and time), and later requests find where the node has it without sending anything.

Any gateway may place an adapter's file for a copy: the leader, which owns the copy's actor, and a follower, which
finds the actor by its name on the cluster (`actor_of`): an adapter invoked through a follower reaches the copy as
one invoked through the leader does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pier.backends.ray.models import Manifest, chunks, file_manifest
from pier.backends.ray.placement import actor_name
from pier.backends.ray.ray_calls import RayUnavailable, _awaitable, _blocking

log = logging.getLogger("pier.backends.ray")

MIB = 2**20


class NodeFiles:
    """Where each node has the gateway's files (a cache of what the nodes said), and the sending of those it has
    not; `timeout_s` bounds each call to a copy's actor."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._placed: dict[tuple[str, str], str] = {}  # (node id, manifest key) -> the file's folder there
        self._placing: dict[tuple[str, str], asyncio.Lock] = {}

    async def send(self, actor: Any, manifest: Manifest,
                   progress: Callable[[int, int], None] = lambda sent, total: None) -> str:
        """A folder of the gateway's into the actor's node's cache; its path there."""
        import ray

        total, sent = manifest.size, 0
        pieces = chunks(manifest)
        while (piece := await asyncio.to_thread(next, pieces, None)) is not None:
            name, offset, data = piece
            progress(sent, total)
            chunk = ray.put(data)
            await self._call(actor.take.remote(manifest, name, offset, chunk))
            del chunk
            sent += len(data)
        where: str = await self._call(actor.taken.remote(manifest))
        return where

    async def path_on(self, actor: Any, node_id: str, path: str, copy_id: str) -> str:
        """Where the copy whose actor (on `node_id`) is `actor` reads `path`, a file on the gateway's host: the same
        path when its node sees it; otherwise the file goes to the node's cache first, once per node."""
        file = Path(path)
        manifest = await asyncio.to_thread(file_manifest, file)  # a stat: a file changed in place is sent again
        key = (node_id, manifest.key)
        async with self._placing.setdefault(key, asyncio.Lock()):
            where = self._placed.get(key)
            if where is None:
                where = await self._call(actor.place.remote(manifest))
                if where is None:
                    log.info("copy %s: sending %s (%.1f MiB) to node %s", copy_id, file, manifest.size / MIB, node_id)
                    where = await self.send(actor, manifest)
                self._placed[key] = where
        return str(Path(where) / file.name)

    async def _call(self, ref: Any) -> Any:
        return await asyncio.wait_for(_awaitable(ref), self.timeout_s)


async def actor_of(copy_id: str, timeout_s: float) -> tuple[Any, str]:
    """A copy's actor found by its name on the cluster, and the node it runs on (asked of the actor, so an actor
    started again elsewhere since is found where it is now), for a gateway that does not own the copy."""
    import ray

    try:
        actor = await _blocking(lambda: ray.get_actor(actor_name(copy_id)), timeout_s)
        identity = await asyncio.wait_for(_awaitable(actor.identity.remote()), timeout_s)
    except (ValueError, TimeoutError, ray.exceptions.RayError) as error:
        raise RayUnavailable(f"copy {copy_id} has no actor on a node now ({type(error).__name__})") from None
    return actor, str(identity.node_id)
