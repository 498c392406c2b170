"""The models a multi-model copy holds: loaded by name on first use, least recently used unloaded first when a
new one needs the room (the copy's memory budget), the call that asked waiting (never failing) meanwhile.

`evictions()` is the decision, pure and table-tested. `ModelCache` runs it: one load per model at a time (calls
for a model being loaded wait for that load), models in use are never unloaded (a load that needs their room
waits for them), and with caching disabled (MultiModelConfig.ModelCacheSetting) a model is unloaded as soon as
no call uses it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from pier.multi_model import CacheReport

log = logging.getLogger("pier.server")


@dataclass(frozen=True)
class Held:
    """A loaded model as the eviction decision sees it."""

    name: str
    size: int  # bytes it takes (weights and KV cache)
    busy: bool  # a call is using it


def evictions(held: Sequence[Held], need: int, budget: int) -> list[str] | None:
    """Which models to unload, least recently used first (`held` is in that order), so `need` more bytes fit in
    `budget`; None when they cannot fit until a busy model is released. A model larger than the budget alone still
    loads once nothing else is held (it is better served alone than never)."""
    free = budget - sum(h.size for h in held)
    chosen: list[str] = []
    for model in held:
        if free >= need:
            break
        if not model.busy:
            chosen.append(model.name)
            free += model.size
    if free >= need:
        return chosen
    return None if any(h.busy for h in held) else chosen


@dataclass
class Loaded:
    """A model the cache holds: what serves it, what it takes, how to unload it."""

    app: object  # the ASGI app over the model's engine
    size: int
    unload: Callable[[], None]  # blocking
    users: int = 0


@dataclass(frozen=True)
class Prepared:
    """A model's files in place, before it loads."""

    size: int  # what it will take once loaded
    download_s: float  # bringing the files into place
    load: Callable[[], Loaded]  # blocking


@dataclass
class Use:
    """One call's use of a model: the app to send it to, and how the model was found."""

    app: object
    report: CacheReport


@dataclass
class ModelCache:
    prepare: Callable[[str], Awaitable[Prepared]]  # the model's files in place (raises for an unknown model)
    run: Callable[[Callable[[], object]], Awaitable[object]]  # blocking work off the event loop
    budget: int  # bytes
    keep: bool = True  # ModelCacheSetting Enabled: keep models loaded after use
    _models: OrderedDict[str, Loaded] = field(default_factory=OrderedDict)  # least recently used first
    _loading: dict[str, asyncio.Future[tuple[float, float]]] = field(default_factory=dict)
    _changed: asyncio.Condition | None = None
    _one_load: asyncio.Lock | None = None  # loads one at a time: each decides its evictions on what is held

    @property
    def loaded(self) -> tuple[str, ...]:
        return tuple(self._models)

    @asynccontextmanager
    async def use(self, name: str) -> AsyncIterator[Use]:
        """The model `name`, loaded (waiting for it when it is not) and kept from unloading until the block ends."""
        started = time.monotonic()
        hit = name in self._models
        unload_s = download_s = 0.0
        counted = False  # the load this call started counted it as the model's first user
        while name not in self._models:
            pending = self._loading.get(name)
            if pending is None:
                pending = asyncio.ensure_future(self._load(name))
                self._loading[name] = pending
                pending.add_done_callback(lambda _: self._loading.pop(name, None))
                unload_s, download_s = await pending
                counted = True
            else:
                await asyncio.shield(pending)
        model = self._models[name]
        self._models.move_to_end(name)
        if not counted:
            model.users += 1
        report = CacheReport(hit, _us(time.monotonic() - started) if not hit else 0, _us(unload_s), _us(download_s),
                             self.loaded)
        try:
            yield Use(model.app, report)
        finally:
            model.users -= 1
            if not self.keep and model.users == 0 and self._models.get(name) is model:
                await self._unload([name])
            await self._notify()

    async def close(self) -> None:
        await self._unload(list(self._models))

    async def _load(self, name: str) -> tuple[float, float]:
        prepared = await self.prepare(name)
        if self._one_load is None:
            self._one_load = asyncio.Lock()
        async with self._one_load:
            unload_s = 0.0
            while (chosen := evictions(self._held(), prepared.size, self.budget)) is None:
                await self._wait_for_release()
            if chosen:
                started = time.monotonic()
                await self._unload(chosen)
                unload_s = time.monotonic() - started
            started = time.monotonic()
            loaded = await self.run(prepared.load)
            assert isinstance(loaded, Loaded)
            # In use by the call that asked from now on: another load must not unload it before that call resumes.
            loaded.users = 1
            self._models[name] = loaded
        log.info("model %s loaded in %.2f s (%.1f MB; %d held: %s)", name, time.monotonic() - started,
                 loaded.size / 2**20, len(self._models), ", ".join(self._models))
        return unload_s, prepared.download_s

    async def _unload(self, names: list[str]) -> None:
        for name in names:
            model = self._models.pop(name)
            await self.run(model.unload)
            log.info("model %s unloaded (%.1f MB freed)", name, model.size / 2**20)

    def _held(self) -> list[Held]:
        return [Held(name, m.size, m.users > 0) for name, m in self._models.items()]

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _wait_for_release(self) -> None:
        changed = self._condition()
        async with changed:
            await changed.wait()

    async def _notify(self) -> None:
        changed = self._condition()
        async with changed:
            changed.notify_all()


def _us(seconds: float) -> int:
    return int(seconds * 1_000_000)
