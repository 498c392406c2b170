"""The prefix cache shared by all sequences.

Every sequence id in the unified KV cache is a candidate prefix: the running ones and the finished ones
kept idle. A new prompt forks the longest match (llama.cpp's `seq_cp`, metadata only) and computes only
the rest. Idle prefixes stay until their cells or sequence id are needed, least recently used first out;
the parts no prompt has come back for yet are held to the retention budget (`retention.py`). What leaves
the KV cache goes to host memory first (`host_cache.py`), and a prompt that matches a saved prefix better
than anything on the device has it restored instead of recomputed.

While prefixes go to host memory, a finished sequence goes there at once, all but the part other prompts
branch off from (a shared system prompt), and its next turn is restored. The round trip is what keeps the KV
cache compact: a sequence decoded beside others holds one cell in every few (each step writes one cell per
running sequence, side by side), and llama.cpp's tiled flash attention, used for steps of 64 tokens or more,
skips a 64 x 64 block of queries and cells only when none of the queries may see any of its cells. A prompt
attending over a history scattered among other sequences' cells computes nearly every block up to the highest
cell in use; a restored history is written into free cells in one run. Prompt steps over scattered histories
cost 1.5-1.8x (benchmarks/prompt_layout.py), the copies out and back about 40 ms per 1,000 tokens.

A model whose memory keeps less than every position (a sliding window, recurrent layers: `model_memory.py`) can go
on only from some prefixes: a match is taken only where llama.cpp still holds what the next token needs (asked of
the runner for a sequence on the device, predicted from what a saved state holds for host memory), and checked
again once adopted. A recurrent state cannot be cut back, so such a model's idle prefixes stay whole or leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pier.engine.common_prefix import common_prefix
from pier.engine.kv_cache import KvCache, KvSlot
from pier.engine.model_memory import HeldPositions, resumable, saved_first
from pier.engine.runner import LLAMA_MAX_SEQ

if TYPE_CHECKING:
    from pier.engine.host_cache import HostCache, HostEntry
    from pier.engine.retention import RetentionBudget


@dataclass(frozen=True)
class PrefixMatch:
    slot: KvSlot | None  # a sequence in the KV cache holding the prefix (with `saved`: holding the saved one's base)
    length: int
    saved: HostEntry | None = None  # or a prefix saved in host memory, restored into the new sequence

    def new_cells(self, prompt_len: int) -> int:
        """Free cells a prompt of `prompt_len` tokens needs when it adopts this match: a fork shares the
        matched cells; a restore writes the whole saved prefix before cutting it back to the match."""
        if self.saved is not None:  # a saved suffix goes after its base, forked from `slot`
            return max(len(self.saved.tokens), prompt_len) - self.saved.base
        return prompt_len - self.length


NO_MATCH = PrefixMatch(None, 0)
MIN_KEPT = 16  # a shorter proven part (BOS, a chat template's first tokens) is not worth a sequence id of its own
MIN_SAVED = 16  # nor a shorter prefix a copy to host memory (HostCache.min_tokens), nor a shorter gain a restore


def sequence_ids(parallel: int, n_ctx: int) -> int:
    """Sequence ids a context should reserve: one per running sequence plus one for every idle prefix its cells
    could hold (shorter than MIN_KEPT tokens, only the newest is kept), up to llama.cpp's limit. Ids cost
    llama.cpp next to nothing; running out of them evicts prefixes that still had room."""
    return min(LLAMA_MAX_SEQ, parallel + n_ctx // MIN_KEPT)


class PrefixCache:
    def __init__(self, kv: KvCache, budget: RetentionBudget | None, host: HostCache | None = None) -> None:
        """`budget` None: the cache is off (a finished sequence frees its cells at once). `host` None: what
        leaves the KV cache is dropped."""
        self.kv = kv
        self.budget = budget
        self.host = host if budget is not None else None
        self._clock = 0

    def match(self, prompt: Sequence[int], adapter: str = "") -> PrefixMatch:
        """The longest cached prefix of `prompt`, leaving at least one token to evaluate for logits, among the
        prefixes computed under the same LoRA adapter (another adapter's KV for the same tokens differs)."""
        if self.budget is None:
            return NO_MATCH
        limit = len(prompt) - 1
        best = NO_MATCH
        for slot in self.kv.slots.values():
            if slot.adapter != adapter:
                continue
            length = common_prefix(slot.tokens, prompt, limit)
            if length > best.length and self.kv.resumable(slot, length):
                best = PrefixMatch(slot, length)
        if self.host is not None:
            # a saved suffix is usable when its base is on the device: the base is the prompt's own start, so
            # exactly when the device's best match covers it, and that sequence is the one to fork it from
            def usable(entry: HostEntry, length: int) -> bool:
                return entry.base <= best.length and self._restorable(entry, length, best.slot)

            saved = self.host.match(prompt, limit, adapter, usable=usable)
            if saved.entry is not None and saved.length >= best.length + MIN_SAVED:
                return PrefixMatch(best.slot if saved.entry.base else None, saved.length, saved.entry)
        return best

    def _restorable(self, entry: HostEntry, length: int, base_from: KvSlot | None) -> bool:
        """May a sequence go on from the first `length` tokens of a saved entry, once restored (after its base,
        forked from `base_from`)? Always for a plain model; otherwise where the state holds what the next token
        needs: its own positions from `entry.first` on, and below them the base's as its sequence holds them now
        (None: not asked, from a thread other than the engine's: the state's own part only)."""
        memory = self.kv.memory
        if memory.plain:
            return True
        first = entry.first
        if entry.base and first <= entry.base and base_from is not None:  # one run down into the forked base
            first = min(entry.base, max(0, self.kv.held(base_from).first))
        return resumable(memory, HeldPositions(first, len(entry.tokens) - 1), length)

    def holds(self, prompt: Sequence[int], adapter: str = "") -> int:
        """Leading tokens of `prompt` the cache holds now, in the KV cache or in host memory: what the copy reports
        to the gateway (server/kv_report.py). Read-only and safe from any thread: it reads copies of the engine's
        collections (list() of a dict or list runs without releasing the GIL), so at worst it is a step stale,
        which a routing hint can afford; the engine never decides on it."""
        if self.budget is None:
            return 0
        prompt = list(prompt)  # common_prefix compares slices: a tuple never equals a list
        plain = self.kv.memory.plain  # otherwise llama.cpp is not asked from this thread: whole prefixes only
        best = 0
        for slot in list(self.kv.slots.values()):
            if slot.adapter == adapter:
                tokens = list(slot.tokens)
                length = common_prefix(tokens, prompt, len(prompt))
                if plain or length == len(tokens):
                    best = max(best, length)
        if self.host is not None:  # a saved suffix counts while its base is on the device (as `match` has it)
            held = best

            def usable(entry: HostEntry, length: int) -> bool:
                return entry.base <= held and self._restorable(entry, length, None)

            best = max(best, self.host.match(prompt, len(prompt), adapter, usable=usable).length)
        return best

    def adopt(self, match: PrefixMatch, into: KvSlot, prompt: Sequence[int] | None = None) -> int:
        """Give `into` the matched prefix; returns how many tokens it got (a restore can fail for want of
        cells, then none). An idle prefix wholly contained in the new sequence is dropped: the new sequence
        holds the same cells, so nothing is lost. `prompt`, on a request's first admission, tells the
        retention budget whether an earlier eviction cost it."""
        reused = self._restore(match, into) if match.saved is not None else self._fork(match.slot, match.length, into)
        if not self.kv.resumable(into, reused):  # what llama.cpp holds is not what was predicted: start afresh
            self.kv.truncate(into, 0)
            if match.saved is not None and self.host is not None:
                self.host.forget(match.saved)
            reused = 0
        into.proven = reused  # content a prompt came back for: worth keeping when this one ends
        if self.budget is not None and prompt is not None:
            regret = self.budget.admitted(prompt, reused)
            if match.saved is not None and reused > match.saved.base and not regret:  # restored, not just forked
                self.budget.came_back()
            into.proven = reused + regret  # or would have, had an eviction not lost it
        return reused

    def _fork(self, source: KvSlot | None, length: int, into: KvSlot) -> int:
        """Let `into` share the first `length` positions of `source` (none without one); returns how many."""
        if source is None or length == 0:
            return 0
        source.proven = max(source.proven, length)
        if length + MIN_KEPT <= source.prompt_len:  # branching off inside the source's own prompt (a chat
            source.shared = max(source.shared, length)  # template may re-render a turn's last few tokens)
        into.shared = min(length, source.shared)
        self.kv.fork(source, length, into)
        if not source.busy and length == len(source):
            self.kv.release(source)
        else:
            source.last_used = self._tick()
        return length

    def _restore(self, match: PrefixMatch, into: KvSlot) -> int:
        """Write a saved prefix back into `into`; one saved from its base on goes after the base, forked from the
        sequence holding it. Returns the tokens `into` got: the match, or the base alone when the cells are short."""
        saved = match.saved
        assert saved is not None and self.host is not None
        assert match.slot is not None or not saved.base, "a saved suffix is restored after its base"
        base = self._fork(match.slot, saved.base, into)
        if not self.kv.restore(into, saved.tokens, saved.state, base):
            return base
        self.host.restored(saved)
        if match.length + MIN_KEPT <= len(saved.tokens):  # the prompt branches off inside the saved one: the
            into.shared = max(into.shared, match.length)  # common part stays on the device for the next to fork
        if match.length < len(into):
            self.kv.truncate(into, match.length)
        self._drop_contained(into)
        return match.length

    def _drop_contained(self, into: KvSlot) -> None:
        """Idle prefixes that `into` now holds in full (an older turn of a restored conversation) are copies:
        free their cells. Host memory holds them too, inside the restored entry."""
        for slot in self._idle_lru(into):
            contained = len(slot) <= len(into) and common_prefix(slot.tokens, into.tokens, len(slot)) == len(slot)
            if contained and slot.adapter == into.adapter:
                into.shared = max(into.shared, slot.shared)
                self.kv.release(slot)

    def retire(self, slot: KvSlot) -> None:
        """A sequence finished: keep its KV as a cached prefix, or free it when caching is off."""
        if self.budget is None or not slot.tokens:
            self.kv.release(slot)
            return
        slot.busy = False
        slot.last_used = self._tick()
        self.budget.finished()
        if self.saving:
            self._to_host(slot)
        self._trim(self.budget)

    def _to_host(self, slot: KvSlot) -> None:
        """Send a finished sequence to host memory, but for its shared part, so that its next turn is restored
        in one run of cells instead of attending over cells scattered among its neighbours' (module docstring).
        It stays when host memory does not take it (larger than the whole budget)."""
        if len(slot) - slot.shared < MIN_SAVED:
            return
        # the shared part stays: save only what follows it
        base = slot.shared if slot.shared >= MIN_KEPT and self._cuts else 0
        self._save(slot, base)
        if self.host is None or not self.host.holds(slot.tokens, slot.adapter, base):
            return
        if base:
            self.kv.truncate(slot, slot.shared)
        else:
            self.kv.release(slot)

    def _trim(self, budget: RetentionBudget) -> None:
        """Cut idle prefixes back to the part kept regardless of the budget (`_kept`), least recently used
        first, until the rest fits the budget. The most recently used is kept whole: the likeliest to come back
        (a chat's next turn, or a single user's next request)."""
        over = self.speculative_cells - budget.cells
        for slot in self._idle_lru(None)[:-1]:
            if over <= 0:
                return
            keep = self._kept(slot)
            if keep >= len(slot) or (keep >= MIN_KEPT and not self._cuts):  # a recurrent state is kept whole
                continue
            before = self.kv.used_cells
            budget.evicted(slot.tokens)
            if keep >= MIN_KEPT:
                self._save(slot, keep)
                self.kv.truncate(slot, keep)
            else:
                self._evict(slot)
            over -= before - self.kv.used_cells

    @property
    def _cuts(self) -> bool:
        """May an idle prefix be cut back? Not a recurrent state: llama.cpp keeps it only after the last position."""
        return not self.kv.memory.recurrent

    @property
    def saving(self) -> bool:
        """Do prefixes leaving the KV cache go to host memory now?"""
        return self.host is not None and self.budget is not None and self.budget.worth_saving

    def _kept(self, slot: KvSlot) -> int:
        """Leading tokens of an idle prefix that the retention budget does not count: its proven part. While
        prefixes go to host memory, only the part that prompts branching off it shared (a system prompt) for the
        next one to fork: a chat's history, proven by its own next turn only, is restored from host memory in one
        run of cells (module docstring)."""
        return slot.shared if self.saving else slot.proven

    @property
    def speculative_cells(self) -> int:
        """Cells only idle prefixes hold, past their kept part: what keeping the cache costs on speculation."""
        held: set[int] = set()
        for slot in self.kv.slots.values():
            held.update(slot.cells if slot.busy else slot.cells[: self._kept(slot)])
        return self.kv.used_cells - len(held)

    def make_room(self, cells: int, keep: KvSlot | None = None) -> bool:
        """Evict idle prefixes, least recently used first, until `cells` cells are free."""
        if self.kv.free_cells >= cells:  # the common case, checked before sorting anything
            return True
        for slot in self._idle_lru(keep):
            if self.kv.free_cells >= cells:
                break
            self._evict(slot)
        return self.kv.free_cells >= cells

    def free_id(self, keep: KvSlot | None = None) -> bool:
        """Make sure a sequence id is free, evicting the least recently used idle prefix if needed."""
        if not self.kv.has_free_id:
            for slot in self._idle_lru(keep)[:1]:
                self._evict(slot)
        return self.kv.has_free_id

    def clear(self) -> None:
        for slot in self._idle_lru(None):
            self._evict(slot)

    def _evict(self, slot: KvSlot) -> None:
        self._save(slot)
        self.kv.release(slot)

    def _save(self, slot: KvSlot, base: int = 0) -> None:
        """Copy an idle prefix to host memory before it leaves the KV cache, from `base` on when its first `base`
        tokens stay on the device, unless that part is too short to matter, host memory already holds it (or a
        longer prefix that starts with it), or prefixes do not come back."""
        if self.host is None or self.budget is None or len(slot) - base < MIN_SAVED:
            return
        self.budget.left_device()
        if self.budget.worth_saving and self.host.worth_saving(slot.tokens, slot.adapter, base):
            memory, first = self.kv.memory, 0
            if not memory.plain:  # what the state will hold of every layer (engine/model_memory.py)
                first = max(saved_first(memory, len(slot)), self.kv.held(slot).first)
            self.host.put(slot.tokens, self.kv.save(slot, base), slot.adapter, base, first)

    @property
    def idle_count(self) -> int:
        return sum(1 for slot in self.kv.slots.values() if not slot.busy)

    def _idle_lru(self, keep: KvSlot | None) -> list[KvSlot]:
        idle = [s for s in self.kv.slots.values() if not s.busy and s is not keep]
        return sorted(idle, key=lambda s: s.last_used)

    def _tick(self) -> int:
        self._clock += 1
        return self._clock
