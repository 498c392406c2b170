"""How many requests one component takes at once, and where the rest wait.

Each copy takes at most its concurrency (what its backend reports, from the environment the copy runs with:
see pier.channel.concurrency), so a component takes at most the sum over its ready copies. A request that finds a
copy with room goes there at once (the copy chooser picks which); otherwise it joins the component's bounded FIFO
queue, and each time a request ends (or a new one arrives with news of more copies) the oldest waiters go to
the first copy with room. A request that finds the queue full is refused at once, and one that waits longer
than its bound gives up: both raise `Throttled` (ThrottlingException, HTTP 429), which SageMaker and OpenAI
clients retry with backoff; a throttled request never reached a copy, so the retry repeats no work.
Waiting here instead of on a copy keeps the routing decision late, when it knows the most.
Everything runs on one event loop, so plain counters are enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from pier.backends.base import CopyStatus
from pier.runtime.copy_choice import DEFAULT_CONCURRENCY, DEFAULT_SLACK, CopyChooser, Lease
from pier.runtime.errors import Throttled
from pier.runtime.routing_strategy import DEFAULT_REQUEST_ROUTING, RequestRouting

MAX_IDLE_COMPONENTS = 256  # idle components' choosers beyond this many are dropped (with what they remember)


@dataclass(frozen=True)
class AdmissionLimits:
    queue: int = 256  # requests that may wait per component; one more is refused at once
    timeout_s: float = 30.0  # the longest a request waits for a copy with room
    affinity_slack: int = DEFAULT_SLACK
    default_concurrency: int = DEFAULT_CONCURRENCY  # for copies whose backend reports none


@dataclass(eq=False)
class _Waiter:
    prefix: Sequence[str]
    exclude: Collection[str]
    route: RequestRouting
    lease: asyncio.Future[Lease]


@dataclass(eq=False)
class _Component:
    chooser: CopyChooser
    waiters: list[_Waiter] = field(default_factory=list)


class Admission:
    def __init__(self, limits: AdmissionLimits | None = None) -> None:
        self.limits = limits or AdmissionLimits()
        self._components: dict[str, _Component] = {}

    def chooser(self, component: str) -> CopyChooser:
        return self._component(component).chooser

    def in_use(self, component: str) -> int:
        entry = self._components.get(component)
        return entry.chooser.in_flight if entry else 0

    def waiting(self, component: str) -> int:
        entry = self._components.get(component)
        return len(entry.waiters) if entry else 0

    async def lease(self, component: str, copies: Sequence[CopyStatus] | None, prefix: Sequence[str] = (), *,
                    exclude: Collection[str] = (), timeout_s: float | None = None,
                    route: RequestRouting = DEFAULT_REQUEST_ROUTING
                    ) -> Lease | None:
        """A lease on a ready copy of `component` with room (none of `exclude`), waiting at most `timeout_s`
        (default: the configured bound) behind earlier requests. None when no copy outside `exclude` is ready at
        all, so there is nothing to wait for; raises Throttled when the queue is full or time is up.

        `copies` is a fresh snapshot of the component's copies (None: the latest one given, as for a request's
        second try); the latest is what waiting requests are placed on. `route`: the strategy, and the one copy a
        session's request may take (it waits for that copy's room)."""
        timeout_s = max(0.0, self.limits.timeout_s if timeout_s is None else timeout_s)
        entry = self._component(component)
        chooser = entry.chooser
        if copies is not None:
            chooser.sync(copies)
        if route.pin is not None:  # every other copy is out of its reach
            exclude = {*exclude, *(c.copy_id for c in chooser.copies if c.copy_id != route.pin)}
        self._dispatch(entry)  # earlier requests first: this snapshot may bring room they can use
        if chooser.room(exclude) > 0:  # what is left is room no earlier request can use
            lease = chooser.pick(chooser.copies, prefix, exclude=exclude, route=route)
            if lease is not None:
                return lease
        if not chooser.any_ready(exclude):
            return None
        if len(entry.waiters) >= self.limits.queue:
            raise Throttled(
                f"Inference component {component} is busy: {chooser.in_flight} requests are running, as many as its "
                f"copies take, and {len(entry.waiters)} are waiting, the most it queues. Retry with backoff, add "
                "copies, or raise the queue limit."
            )
        waiter = _Waiter(prefix, exclude, route, asyncio.get_running_loop().create_future())
        entry.waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(waiter.lease)
        except BaseException as error:
            self._abandon(entry, waiter)
            if isinstance(error, TimeoutError):
                raise Throttled(
                    f"Inference component {component} stayed busy: no copy had room within {timeout_s:.1f} s "
                    f"({chooser.in_flight} requests running). Retry with backoff or add copies."
                ) from None
            raise

    def _component(self, component: str) -> _Component:
        entry = self._components.get(component)
        if entry is None:
            self._forget_idle()
            entry = _Component(CopyChooser(slack=self.limits.affinity_slack,
                                      default_concurrency=self.limits.default_concurrency))
            entry.chooser.on_release = lambda: self._dispatch(entry)
            self._components[component] = entry
        return entry

    @staticmethod
    def _dispatch(entry: _Component) -> None:
        """Hand the copies' free room to waiting requests, oldest first, on the freshest snapshot of copies. A
        waiter that cannot use the room (it excludes the copies that have it) keeps its place."""
        chooser, kept = entry.chooser, []
        for index, waiter in enumerate(entry.waiters):
            if waiter.lease.done():
                continue  # gave up: it is leaving the queue
            if chooser.room() == 0:
                kept.extend(entry.waiters[index:])
                break
            lease = chooser.pick(chooser.copies, waiter.prefix, exclude=waiter.exclude, route=waiter.route)
            if lease is None:
                kept.append(waiter)
            else:
                waiter.lease.set_result(lease)
        entry.waiters = kept

    @staticmethod
    def _abandon(entry: _Component, waiter: _Waiter) -> None:
        """A waiter that gives up (timeout or cancellation) leaves the queue; if a lease was handed to it at the
        same moment, it is released, so the room goes to the next in line."""
        if waiter.lease.done() and not waiter.lease.cancelled():
            waiter.lease.result().release()
        else:
            waiter.lease.cancel()
        if waiter in entry.waiters:
            entry.waiters.remove(waiter)

    def _forget_idle(self) -> None:
        if len(self._components) < MAX_IDLE_COMPONENTS:
            return
        for name in [n for n, e in self._components.items() if e.chooser.idle and not e.waiters]:
            del self._components[name]
