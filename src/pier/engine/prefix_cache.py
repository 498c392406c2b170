"""The prefix cache shared by all sequences.

Every sequence id in the unified KV cache is a candidate prefix: the running ones and the finished ones
kept idle. A new prompt forks the longest match (llama.cpp's `seq_cp`, metadata only) and computes only
the rest. Idle prefixes stay until their cells or their sequence id are needed, least recently used first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pier.engine.kv_cache import KvCache, KvSlot


@dataclass(frozen=True)
class PrefixMatch:
    slot: KvSlot | None
    length: int


NO_MATCH = PrefixMatch(None, 0)


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the longest common prefix of a and b, at most `limit`. Slice compares run in C."""
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixCache:
    def __init__(self, kv: KvCache, enabled: bool = True) -> None:
        self.kv = kv
        self.enabled = enabled
        self._clock = 0

    def match(self, prompt: Sequence[int]) -> PrefixMatch:
        """The longest cached prefix of `prompt`, leaving at least one token to evaluate for logits."""
        if not self.enabled:
            return NO_MATCH
        best = NO_MATCH
        for slot in self.kv.slots.values():
            length = common_prefix(slot.tokens, prompt, len(prompt) - 1)
            if length > best.length:
                best = PrefixMatch(slot, length)
        return best

    def adopt(self, match: PrefixMatch, into: KvSlot) -> None:
        """Give `into` the matched prefix. An idle prefix wholly contained in the new sequence is
        dropped: the new sequence holds the same cells, so nothing is lost."""
        if match.slot is None or match.length == 0:
            return
        self.kv.fork(match.slot, match.length, into)
        if not match.slot.busy and match.length == len(match.slot):
            self.kv.release(match.slot)
        else:
            match.slot.last_used = self._tick()

    def retire(self, slot: KvSlot) -> None:
        """A sequence finished: keep its KV as a cached prefix, or free it when caching is off."""
        if not self.enabled or not slot.tokens:
            self.kv.release(slot)
            return
        slot.busy = False
        slot.last_used = self._tick()

    def make_room(self, cells: int, keep: KvSlot | None = None) -> bool:
        """Evict idle prefixes, least recently used first, until `cells` cells are free."""
        if self.kv.free_cells >= cells:  # the common case, checked before sorting anything
            return True
        for slot in self._idle_lru(keep):
            if self.kv.free_cells >= cells:
                break
            self.kv.release(slot)
        return self.kv.free_cells >= cells

    def free_id(self, keep: KvSlot | None = None) -> bool:
        """Make sure a sequence id is free, evicting the least recently used idle prefix if needed."""
        if not self.kv.has_free_id:
            for slot in self._idle_lru(keep)[:1]:
                self.kv.release(slot)
        return self.kv.has_free_id

    def clear(self) -> None:
        for slot in self._idle_lru(None):
            self.kv.release(slot)

    @property
    def idle_count(self) -> int:
        return sum(1 for slot in self.kv.slots.values() if not slot.busy)

    def _idle_lru(self, keep: KvSlot | None) -> list[KvSlot]:
        idle = [s for s in self.kv.slots.values() if not s.busy and s is not keep]
        return sorted(idle, key=lambda s: s.last_used)

    def _tick(self) -> int:
        self._clock += 1
        return self._clock
