"""The prefix cache shared by all sequences.

Every sequence id in the unified KV cache is a candidate prefix: the running ones and the finished ones
kept idle. A new prompt forks the longest match (llama.cpp's `seq_cp`, metadata only) and computes only
the rest. Idle prefixes stay until their cells or sequence id are needed, least recently used first out;
the parts no prompt has come back for yet are held to the retention budget (`retention.py`: idle cells
slow every decode).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pier.engine.common_prefix import common_prefix
from pier.engine.kv_cache import KvCache, KvSlot

if TYPE_CHECKING:
    from pier.engine.retention import RetentionBudget


@dataclass(frozen=True)
class PrefixMatch:
    slot: KvSlot | None
    length: int


NO_MATCH = PrefixMatch(None, 0)
MIN_KEPT = 16  # a shorter proven part (BOS, a chat template's first tokens) is not worth a sequence id of its own


class PrefixCache:
    def __init__(self, kv: KvCache, budget: RetentionBudget | None) -> None:
        """`budget` None: the cache is off (a finished sequence frees its cells at once)."""
        self.kv = kv
        self.budget = budget
        self._clock = 0

    def match(self, prompt: Sequence[int]) -> PrefixMatch:
        """The longest cached prefix of `prompt`, leaving at least one token to evaluate for logits."""
        if self.budget is None:
            return NO_MATCH
        best = NO_MATCH
        for slot in self.kv.slots.values():
            length = common_prefix(slot.tokens, prompt, len(prompt) - 1)
            if length > best.length:
                best = PrefixMatch(slot, length)
        return best

    def adopt(self, match: PrefixMatch, into: KvSlot, prompt: Sequence[int] | None = None) -> None:
        """Give `into` the matched prefix. An idle prefix wholly contained in the new sequence is
        dropped: the new sequence holds the same cells, so nothing is lost. `prompt`, on a request's first
        admission, tells the retention budget whether an earlier eviction cost it."""
        regret = self.budget.admitted(prompt, match.length) if self.budget is not None and prompt is not None else 0
        into.proven = match.length + regret  # content a prompt came back for: worth keeping when this one ends
        source = match.slot
        if source is None or match.length == 0:
            return
        source.proven = max(source.proven, match.length)
        self.kv.fork(source, match.length, into)
        if not source.busy and match.length == len(source):
            self.kv.release(source)
        else:
            source.last_used = self._tick()

    def retire(self, slot: KvSlot) -> None:
        """A sequence finished: keep its KV as a cached prefix, or free it when caching is off."""
        if self.budget is None or not slot.tokens:
            self.kv.release(slot)
            return
        slot.busy = False
        slot.last_used = self._tick()
        self.budget.finished()
        self._trim(self.budget)

    def _trim(self, budget: RetentionBudget) -> None:
        """Cut idle prefixes back to their proven part, least recently used first, until the speculative
        cells fit the budget. The most recently used is kept whole: the likeliest to come back (a chat's next
        turn, or a single user's next request)."""
        over = self.speculative_cells - budget.cells
        for slot in self._idle_lru(None)[:-1]:
            if over <= 0:
                return
            if slot.proven >= len(slot):
                continue
            before = self.kv.used_cells
            budget.evicted(slot.tokens)
            if slot.proven >= MIN_KEPT:
                self.kv.truncate(slot, slot.proven)
            else:
                self.kv.release(slot)
            over -= before - self.kv.used_cells

    @property
    def speculative_cells(self) -> int:
        """Cells only idle prefixes hold, past their proven part: what keeping the cache costs on speculation."""
        held: set[int] = set()
        for slot in self.kv.slots.values():
            held.update(slot.cells if slot.busy else slot.cells[: slot.proven])
        return self.kv.used_cells - len(held)

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
