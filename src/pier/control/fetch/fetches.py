"""Model fetches in the background: the reconciler asks each tick and never waits for a download, nor for the
conversion of a Hugging Face checkpoint that follows it (whose progress it can read meanwhile)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pier.control.fetch.conversion import Conversions
from pier.control.fetch.model_store import ModelDataError, ModelStore
from pier.control.fetch.source import ModelSource


@dataclass(frozen=True)
class Fetched:
    folder: Path | None = None  # set when the files are ready
    error: str = ""  # set when fetching failed, in words for a FailureReason
    weights_mb: int = 0  # the size of the folder's GGUF files, once ready
    progress: str = ""  # while not ready: the step a conversion is at ("converting: 40% written"), if any


@dataclass(frozen=True)
class _Ready:
    folder: Path
    weights_mb: int


class Fetches:
    def __init__(self, store: ModelStore) -> None:
        self.store = store
        self.notify: Callable[[], None] = lambda: None  # called on the event loop when a fetch ends
        self.conversions = Conversions(store.root)
        self._tasks: dict[ModelSource, asyncio.Future[_Ready]] = {}
        self._progress: dict[ModelSource, str] = {}  # written by the workers, read by the tick

    def get(self, source: ModelSource) -> Fetched:
        """Where the fetch of `source` stands, starting it if nothing is known about it."""
        task = self._tasks.get(source)
        if task is None:
            self._tasks[source] = self._start(source)
            return Fetched()
        if not task.done():
            return Fetched(progress=self._progress.get(source, ""))
        error = task.exception()
        if error is None:
            ready = task.result()
            return Fetched(folder=ready.folder, weights_mb=ready.weights_mb)
        if isinstance(error, ModelDataError):
            return Fetched(error=error.message)
        return Fetched(error=f"Fetching {source.url} failed: {type(error).__name__}: {error}")

    async def wait(self, source: ModelSource) -> Fetched:
        """Where the fetch of `source` stands once it has ended, starting it if nothing is known about it. Every
        waiter waits on the one fetch; a waiter cancelled (its deadline) leaves it running for the others."""
        task = self._tasks.get(source)
        if task is None:
            task = self._tasks[source] = self._start(source)
        await asyncio.wait({task})
        return self.get(source)

    def forget_failures(self) -> None:
        """Let failed fetches run again (the user changed something; the source may be fixed now)."""
        for source in list(self._tasks):
            self.forget_failure(source)

    def forget_failure(self, source: ModelSource) -> None:
        """Let the fetch of `source` run again if it failed."""
        task = self._tasks.get(source)
        if task is not None and task.done() and task.exception() is not None:
            del self._tasks[source]
            self._progress.pop(source, None)

    def close(self) -> None:
        for task in self._tasks.values():
            task.cancel()

    def _start(self, source: ModelSource) -> asyncio.Future[_Ready]:
        """Fetch on a daemon thread: a download in progress must not hold up the gateway's exit, and neither the
        download nor walking and hashing the files may hold up the event loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Ready] = loop.create_future()

        def settle(result: _Ready | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                assert result is not None
                future.set_result(result)
            self.notify()

        def work() -> None:
            try:
                folder = self.store.fetch(source)
                if source.convert:
                    folder = self.conversions.serve(folder, source.quantize, partial(self._report, source),
                                                    source.url, partial(self._base_config, source))
                result, error = _Ready(folder, self.store.measure(folder).weights_mb), None
            except Exception as failure:
                result, error = None, failure
            self._progress.pop(source, None)
            with contextlib.suppress(RuntimeError):  # the loop closed while we worked
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=work, name=f"fetch {source.url}", daemon=True).start()
        return future

    def _base_config(self, source: ModelSource, name: str) -> Path:
        """The folder holding a LoRA adapter's base model's config.json: the local folder its adapter_config.json
        names, else that Hub repo's config.json alone, fetched into the store like any model file."""
        local = Path(os.path.expanduser(name))
        if (local / "config.json").is_file():
            return local
        if name.startswith(("/", ".", "~")) or name.count("/") != 1:
            raise ModelDataError(f"{source.url}: its adapter_config.json names the base model {name!r}, which is no "
                                 "folder holding a config.json on this host nor a Hub repo id: set "
                                 "base_model_name_or_path to the base model's Hub id (org/name) or to such a folder.")
        return self.store.fetch(ModelSource(f"hf://{name.strip('/')}/config.json", token=source.token))

    def _report(self, source: ModelSource, step: str) -> None:
        """A conversion's step, read by the next tick (a worker thread may not wake the loop's event)."""
        self._progress[source] = f"Converting {source.url} to GGUF: {step}"
