"""Evicted prefixes kept in host memory, so a prompt that comes back is restored instead of recomputed.

When the prefix cache must drop an idle prefix from the KV cache (its cells or its sequence id are needed,
or it is over the retention budget), it first copies the prefix's KV to host memory with llama.cpp's
per-sequence state (`llama_state_seq_get_data`): the bytes and the tokens they hold. A later prompt that
starts with those tokens gets them written back into a free sequence (`llama_state_seq_set_data`): a memory
copy of ~40 KB per token for the 360M benchmark model, against ~6 ms per token to recompute on two cores.

A sequence that branched off a prefix other sequences share (a system prompt) is saved from that prefix on: its
entry has a *base*, the leading tokens its state leaves out, and is restored only while the base is on the
device, forked from the sequence holding it and not written a second time. So a hundred chats behind one long
system prompt hold one copy of it in the KV cache, not one per restored chat, and each turn copies only its own
part out and back.

Entries are held to a budget in bytes, least recently used out. An entry whose tokens begin a newer one's is
dropped when the newer one restores them too (its base is no longer), so a conversation keeps one entry: its
latest turn. Matches shorter than `min_tokens` are not worth a restore, so entries are filed by their first
`min_tokens` tokens and a prompt is compared only with the entries filed under its own first tokens, and its LoRA
adapter: KV computed under one adapter is never restored for another.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pier.engine.common_prefix import common_prefix
from pier.engine.runner import SeqState


@dataclass(eq=False)
class HostEntry:
    tokens: list[int]
    state: SeqState  # the runner's saved state of a sequence's positions base..len(tokens)-1, holding tokens[base:]
    adapter: str = ""  # the LoRA adapter the state was computed under
    base: int = 0  # leading tokens the state leaves out: a shared prefix, forked on the device when restored
    # the lowest position the state holds in every layer: past `base` for a model whose memory keeps less than
    # every position (a sliding window, recurrent layers: engine/model_memory.py)
    first: int = 0

    @property
    def nbytes(self) -> int:
        return len(self.state)


@dataclass(frozen=True)
class HostMatch:
    entry: HostEntry | None
    length: int


NO_HOST_MATCH = HostMatch(None, 0)


@dataclass
class HostStats:
    saved: int = 0  # prefixes copied to host memory
    restored: int = 0  # prefixes written back into the KV cache
    evicted: int = 0  # entries dropped to stay within the budget


Key = tuple[str, tuple[int, ...]]  # the adapter and the first min_tokens tokens


@dataclass
class HostCache:
    budget_bytes: int
    min_tokens: int = 16  # shorter prefixes are neither kept nor matched
    nbytes: int = 0
    stats: HostStats = field(default_factory=HostStats)
    _lru: OrderedDict[int, HostEntry] = field(default_factory=OrderedDict)  # id -> entry, least recent first
    _filed: dict[Key, list[HostEntry]] = field(default_factory=dict)

    @property
    def entries(self) -> list[HostEntry]:
        """Least recently used first."""
        return list(self._lru.values())

    def __len__(self) -> int:
        return len(self._lru)

    def match(self, prompt: Sequence[int], limit: int, adapter: str = "",
              usable: Callable[[HostEntry, int], bool] | None = None) -> HostMatch:
        """The entry sharing the longest prefix with `prompt`, at most `limit` tokens (and at least min_tokens),
        among those `usable` accepts for that many tokens (the prefix cache's test that an entry's base is on the
        device, and that the model can go on from it)."""
        best = NO_HOST_MATCH
        for entry in self._filed.get(self._key(prompt, adapter), ()):
            length = common_prefix(entry.tokens, prompt, limit)
            better = length > max(best.length, entry.base) and length >= self.min_tokens
            if better and (usable is None or usable(entry, length)):
                best = HostMatch(entry, length)
        return best

    def holds(self, tokens: Sequence[int], adapter: str = "", base: int = 0) -> bool:
        """Is there an entry that begins with `tokens` and leaves out at most `base` of them? Then saving them
        again from `base` on would add nothing."""
        n = len(tokens)
        filed = self._filed.get(self._key(tokens, adapter), ())
        return any(len(e.tokens) >= n and e.base <= base and e.tokens[:n] == list(tokens) for e in filed)

    def worth_saving(self, tokens: Sequence[int], adapter: str = "", base: int = 0) -> bool:
        return len(tokens) - base >= self.min_tokens and not self.holds(tokens, adapter, base)

    def put(self, tokens: Sequence[int], state: SeqState, adapter: str = "", base: int = 0,
            first: int = 0) -> HostEntry | None:
        """Keep `state`, the KV of `tokens[base:]`. Entries it holds all of (their tokens begin it, their base is
        no shorter) are dropped, then the least recently used until it fits. None when it is too short or larger
        than the whole budget."""
        if len(tokens) - base < self.min_tokens or not 0 < len(state) <= self.budget_bytes:
            return None
        entry = HostEntry(list(tokens), state, adapter, base, max(base, first))
        for older in self._contained_in(entry):
            self._drop(older)
        while self.nbytes + entry.nbytes > self.budget_bytes:
            self._drop(next(iter(self._lru.values())))
            self.stats.evicted += 1
        self._lru[id(entry)] = entry
        self._filed.setdefault(self._key(entry.tokens, adapter), []).append(entry)
        self.nbytes += entry.nbytes
        self.stats.saved += 1
        return entry

    def restored(self, entry: HostEntry) -> None:
        """`entry` was written back into the KV cache. It stays (most recently used now): a restore copies,
        and if the device copy is later dropped unsaved the prompt can still come back to this one."""
        if id(entry) in self._lru:
            self._lru.move_to_end(id(entry))
        self.stats.restored += 1

    def forget(self, entry: HostEntry) -> None:
        """Drop an entry the model could not go on from after all."""
        if id(entry) in self._lru:
            self._drop(entry)

    def _contained_in(self, entry: HostEntry) -> list[HostEntry]:
        tokens = entry.tokens
        return [e for e in self._filed.get(self._key(tokens, entry.adapter), ())
                if e.base >= entry.base and e.tokens == tokens[: len(e.tokens)]]

    def _drop(self, entry: HostEntry) -> None:
        del self._lru[id(entry)]
        key = self._key(entry.tokens, entry.adapter)
        filed = self._filed[key]
        filed.remove(entry)
        if not filed:
            del self._filed[key]
        self.nbytes -= entry.nbytes

    def _key(self, tokens: Sequence[int], adapter: str) -> Key:
        return adapter, tuple(tokens[: self.min_tokens])
