"""An adapter's GGUF file as this gateway's host has it, for the header that names it to a copy
(pier.control.adapters.adapter_files).

The leader fetches an adapter's artifact into its model store and records that folder (the component's
`model_dir`). A gateway whose host has no such folder (a follower with a state folder of its own, on another host)
fetches the same artifact into its own store, with the leader's code (Fetches): the store is keyed by content, so
the same bytes land at the same place under its own `models/`. One fetch per artifact, off the event loop; the
requests that arrive meanwhile wait for it, each no longer than its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

from pier.channel.headers import ADAPTER_FILE_HEADER
from pier.control import adapters
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.source import ModelSource
from pier.control.reconciler import component_source
from pier.control.records import ComponentRecord
from pier.runtime.errors import ModelNotReady, ServiceUnavailable

log = logging.getLogger("pier.gateway")

RETRY_S = 10.0  # a failed fetch answers every request this long before the next request tries again


class AdapterFiles:
    def __init__(self, fetches: Fetches, *, wait_s: float, retry_s: float = RETRY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.fetches = fetches  # the gateway's own, which its reconciler uses while it leads
        self.wait_s = wait_s  # the request's deadline: past it a request is answered "not ready" and may retry
        self.retry_s = retry_s
        self.clock = clock
        self._failed: dict[ModelSource, float] = {}  # when a fetch failed, so a client's retries do not refetch

    def here(self, record: ComponentRecord) -> dict[str, str] | None:
        """The header naming the adapter's file where the leader fetched it, if this host has that folder (the
        leader, a follower on its host): None when this gateway must fetch it (`fetched`)."""
        assert record.model_dir is not None
        if Path(record.model_dir).is_dir():
            return adapters.adapter_files(record)
        return None

    async def fetched(self, record: ComponentRecord) -> dict[str, str]:
        """The header naming the adapter's file in this gateway's own model store, fetched there first."""
        source = component_source(record)
        failed = self._failed.get(source)
        if failed is not None and self.clock() - failed >= self.retry_s:
            del self._failed[source]
            self.fetches.forget_failure(source)
        try:
            fetched = await asyncio.wait_for(self.fetches.wait(source), self.wait_s)
        except TimeoutError:
            raise ModelNotReady(
                f"Adapter inference component {record.name}'s files are still being fetched by this gateway from "
                f"{source.url} (this host has no {record.model_dir}, where the leader fetched them). Retry in a few "
                "seconds.") from None
        if fetched.error:
            if source not in self._failed:
                self._failed[source] = self.clock()
                log.warning("fetching adapter %s from %s failed: %s", record.name, source.url, fetched.error)
            raise ServiceUnavailable(self._failure(record, fetched.error))
        assert fetched.folder is not None
        try:
            found = await asyncio.to_thread(adapters.adapter_file, str(fetched.folder))
        except ValueError as error:
            raise ServiceUnavailable(self._failure(record, str(error))) from None
        return {ADAPTER_FILE_HEADER: str(found)}

    def _failure(self, record: ComponentRecord, why: str) -> str:
        return (f"Adapter inference component {record.name}'s files are not on this gateway's host (the leader "
                f"fetched them to {record.model_dir}) and this gateway could not fetch them itself: {why} Fix that "
                f"for this gateway's host (it tries again {self.retry_s:g} s after a failure), share the leader's "
                "models folder at that path, or invoke through the leader.")
