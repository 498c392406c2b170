"""Which copy answers a request, by the variant's routing strategy (pier.runtime.routing_strategy): by default the least
busy ready copy with room, unless one that recently served the same prompt prefix is nearly as free (its prefix
cache then skips recomputing that prefix).

`choose()` is the decision, pure over a snapshot: a copy at its concurrency (see pier.channel.concurrency) is never
chosen, whatever the strategy. `CopyChooser` owns the state it decides on: outstanding requests per copy (counted
around each request by a `Lease`), when each copy was last chosen (equal loads take turns), and the prefix blocks
each copy served (a bounded LRU, dropped when its process changes).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from pier.backends.base import CopyState, CopyStatus
from pier.channel.concurrency import copy_concurrency
from pier.runtime.routing_strategy import DEFAULT_REQUEST_ROUTING, RequestRouting, Strategy, rendezvous_order

DEFAULT_SLACK = 4  # how many more outstanding requests a prefix-affine copy may have than the least busy one
DEFAULT_REMEMBERED = 4096  # prefix blocks remembered per copy
DEFAULT_CONCURRENCY = copy_concurrency({})  # for a copy whose backend does not report its own


@dataclass(frozen=True)
class Candidate:
    """One copy as the copy chooser sees it at the moment of a decision."""

    copy: CopyStatus
    outstanding: int = 0
    last_chosen: int = 0  # the copy chooser's pick counter when this copy was last chosen; 0 = never
    cached: Collection[str] = ()  # prefix blocks this copy served (see pier.channel.prefix)
    concurrency: int | None = None  # requests it takes at once; None: no limit
    models: Collection[str] = ()  # a multi-model copy's loaded models, as it last said (or was last sent)
    held: Collection[str] | None = None  # prefix blocks its prefix cache holds, as it last said; None: unsaid

    @property
    def known(self) -> Collection[str]:
        """The prefix blocks KV_AWARE scores on: what the copy last said it holds and what the copy chooser sent it
        since (a framed or streamed answer reports as it starts, before its own prompt is cached), or, until the
        copy says anything, what the copy chooser sent it."""
        return self.cached if self.held is None else self.held

    @property
    def has_room(self) -> bool:
        return self.concurrency is None or self.outstanding < self.concurrency


def ready(copy: CopyStatus) -> bool:
    return copy.state is CopyState.READY and bool(copy.url)


def choose(candidates: Sequence[Candidate], prefix: Sequence[str] = (), *, slack: int = DEFAULT_SLACK,
           route: RequestRouting = DEFAULT_REQUEST_ROUTING,
           draw: Callable[[int], int] = random.randrange) -> CopyStatus | None:
    """The ready copy with room to send a request to, or None when no ready copy has room (or, for a request
    pinned to a copy, when that copy has none).

    By `route.routing.strategy` (see pier.runtime.routing_strategy); `draw(n)` picks an index below n for RANDOM."""
    open_ = [c for c in candidates if ready(c.copy) and c.has_room]
    if route.pin is not None:
        open_ = [c for c in open_ if c.copy.copy_id == route.pin]
    if not open_:
        return None
    if route.model is not None:
        open_ = [c for c in open_ if route.model in c.models] or open_
    strategy = route.routing.strategy
    if strategy is Strategy.LEAST_OUTSTANDING_REQUESTS:
        return least_busy(open_)
    if strategy is Strategy.RANDOM:
        ordered = sorted(open_, key=lambda c: c.copy.copy_id)
        return ordered[draw(len(ordered))].copy
    if strategy is Strategy.PREFIX_AWARE and route.key is not None:
        return prefix_aware(candidates, open_, route.key, route.routing.concurrency_threshold)
    if strategy is Strategy.KV_AWARE:
        return affine(open_, prefix, slack, held=True)
    return affine(open_, prefix, slack)


def least_busy(open_: Sequence[Candidate]) -> CopyStatus:
    """Fewest outstanding; ties go to the copy chosen longest ago, then to the lowest copy id."""
    return min(open_, key=lambda c: (c.outstanding, c.last_chosen, c.copy.copy_id)).copy


def affine(open_: Sequence[Candidate], prefix: Sequence[str], slack: int, *, held: bool = False) -> CopyStatus:
    """`prefix` is the request's cumulative prefix blocks, shortest first. Among copies at most `slack` requests
    busier than the least busy, the one that served the longest run of those blocks wins; with no such copy, the
    least busy. `held` (KV_AWARE): the longest run a copy said its prefix cache holds wins first, and only among
    equals (none holds it, evicted everywhere) the longest run the copy chooser sent it. Back where it was evicted, the
    prefix's part the copy kept still serves, and the copy's retention budget learns that evicting it was a loss
    (engine/retention.py): sent elsewhere, it would start from nothing and teach no copy to keep more."""
    least = min(c.outstanding for c in open_)
    scores = {c.copy.copy_id: (matched_blocks(c.known, prefix) if held else 0, matched_blocks(c.cached, prefix))
              for c in open_}
    affine_ = [c for c in open_ if c.outstanding <= least + slack and scores[c.copy.copy_id] > (0, 0)]
    if affine_:
        best = max(scores[c.copy.copy_id] for c in affine_)
        open_ = [c for c in affine_ if scores[c.copy.copy_id] == best]
    return least_busy(open_)


def prefix_aware(candidates: Sequence[Candidate], open_: Sequence[Candidate], key: str, threshold: int
                 ) -> CopyStatus:
    """The first copy in `key`'s hashed order of the ready copies that has room and fewer than `threshold` in
    flight; when every one is at the threshold, the least busy with room. The order counts every ready copy, full
    or not, so a prefix comes back to its copy once that copy has room again."""
    order = rendezvous_order(key, [c.copy.copy_id for c in candidates if ready(c.copy)])
    by_id = {c.copy.copy_id: c for c in open_}
    for copy_id in order:
        candidate = by_id.get(copy_id)
        if candidate is not None and candidate.outstanding < threshold:
            return candidate.copy
    return least_busy(open_)


def matched_blocks(cached: Collection[str], prefix: Sequence[str]) -> int:
    """How many leading blocks of `prefix` the copy has served."""
    count = 0
    for block in prefix:
        if block not in cached:
            break
        count += 1
    return count


@dataclass
class _CopyLoad:
    pid: int | None
    outstanding: int = 0
    last_chosen: int = 0
    cached: OrderedDict[str, None] = field(default_factory=OrderedDict)
    models: set[str] = field(default_factory=set)
    held: frozenset[str] | None = None  # as the copy last said (KV_AWARE), with what was sent it since


class Lease:
    """One request on one copy: counted as outstanding until released (releasing twice is harmless). Releasing
    tells the copy chooser's `on_release`, so a request waiting for room can take it."""

    def __init__(self, copy: CopyStatus, load: _CopyLoad, chooser: CopyChooser) -> None:
        self.copy = copy
        self._load: _CopyLoad | None = load
        self._router = chooser

    def release(self) -> None:
        if self._load is not None:
            self._load.outstanding -= 1
            self._load = None
            if self._router.on_release is not None:
                self._router.on_release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


class CopyChooser:
    """Routing state for the copies of one component. Used from one event loop: no locks needed.

    `copies` is the latest snapshot of the component's copies it was given; a copy's concurrency is its reported
    one, or `default_concurrency` when its backend reports none."""

    def __init__(self, *, slack: int = DEFAULT_SLACK, remembered: int = DEFAULT_REMEMBERED,
                 default_concurrency: int = DEFAULT_CONCURRENCY, on_release: Callable[[], None] | None = None,
                 draw: Callable[[int], int] = random.randrange) -> None:
        self.slack = slack
        self.draw = draw
        self.remembered = remembered
        self.default_concurrency = default_concurrency
        self.on_release = on_release
        self.copies: Sequence[CopyStatus] = ()
        self._loads: dict[str, _CopyLoad] = {}
        self._picks = 0

    def pick(self, copies: Sequence[CopyStatus], prefix: Sequence[str] = (), *, exclude: Collection[str] = (),
             route: RequestRouting = DEFAULT_REQUEST_ROUTING) -> Lease | None:
        """Choose a copy with room (skipping `exclude`d ids) by `route`, and count the request on it until the
        lease is released; `copies` becomes the latest snapshot."""
        self.sync(copies)
        candidates = [self._candidate(c) for c in copies if c.copy_id not in exclude]
        chosen = choose(candidates, prefix, slack=self.slack, route=route, draw=self.draw)
        if chosen is None:
            return None
        load = self._loads[chosen.copy_id]
        self._picks += 1
        load.last_chosen = self._picks
        load.outstanding += 1
        self._remember(load, prefix)
        if load.held is not None:  # it holds this prompt soon, whether or not its answer's report says so yet
            load.held = load.held.union(prefix)
        if route.model is not None:  # requests for it that arrive while it loads follow it there
            load.models.add(route.model)
        return Lease(chosen, load, self)

    def holds(self, copy_id: str, models: Collection[str]) -> None:
        """What a multi-model copy says it holds now (its answer's CacheReport): models it unloaded drop out."""
        load = self._loads.get(copy_id)
        if load is not None:
            load.models = set(models)

    def holds_prefixes(self, copy_id: str, blocks: Sequence[str] | None) -> None:
        """What a copy says its prefix cache holds now (its answer's pier.channel.kv_held header): it replaces what the
        copy said before (and what was sent it until then), so prefixes it evicted stop drawing KV_AWARE requests. None
        (no header) changes nothing."""
        load = self._loads.get(copy_id)
        if load is not None and blocks is not None:
            load.held = frozenset(blocks)

    def outstanding(self, copy_id: str) -> int:
        load = self._loads.get(copy_id)
        return load.outstanding if load else 0

    def concurrency(self, copy: CopyStatus) -> int:
        return max(1, copy.concurrency or self.default_concurrency)

    def room(self, exclude: Collection[str] = ()) -> int:
        """Requests the ready copies of the latest snapshot (but `exclude`d ones) could take now."""
        return sum(max(0, self.concurrency(c) - self.outstanding(c.copy_id)) for c in self.copies
                   if ready(c) and c.copy_id not in exclude)

    def any_ready(self, exclude: Collection[str] = ()) -> bool:
        return any(ready(c) and c.copy_id not in exclude for c in self.copies)

    @property
    def in_flight(self) -> int:
        return sum(load.outstanding for load in self._loads.values())

    @property
    def idle(self) -> bool:
        return all(load.outstanding == 0 for load in self._loads.values())

    def sync(self, copies: Sequence[CopyStatus]) -> None:
        """Take `copies` as the latest snapshot: track new copies, forget idle ones that are gone, and forget
        what a restarted process had cached."""
        self.copies = copies
        present = {c.copy_id: c for c in copies}
        for copy_id in [i for i, load in self._loads.items() if i not in present and load.outstanding == 0]:
            del self._loads[copy_id]
        for copy_id, copy in present.items():
            load = self._loads.setdefault(copy_id, _CopyLoad(pid=copy.pid))
            if load.pid != copy.pid:
                load.pid = copy.pid
                load.cached.clear()
                load.models.clear()
                load.held = None

    def _candidate(self, copy: CopyStatus) -> Candidate:
        load = self._loads[copy.copy_id]
        return Candidate(copy, load.outstanding, load.last_chosen, load.cached.keys(), self.concurrency(copy),
                         load.models, load.held)

    def _remember(self, load: _CopyLoad, prefix: Sequence[str]) -> None:
        # Remembered when chosen, not when answered: a request with the same prefix arriving meanwhile
        # follows it, and the copy's engine lets it wait for the prefix instead of computing it twice.
        # Shortest last, so it is the most recent: eviction takes the long tails of a chain first.
        for block in reversed(prefix):
            load.cached[block] = None
            load.cached.move_to_end(block)
        while len(load.cached) > self.remembered:
            load.cached.popitem(last=False)
