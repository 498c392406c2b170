"""Ownership of the unified KV cache: which sequence id holds which cells.

llama.cpp's unified cache gives each cell a set of sequence ids; `copy` adds a sequence to cells that
already hold a prefix (no data moves) and a cell is free once no sequence holds it. `KvCache` mirrors
that exactly with reference counts, so the engine knows before each decode how many cells are free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pier.engine.model_memory import HeldPositions, ModelMemory, resumable
from pier.engine.runner import ModelRunner, SeqState


@dataclass(eq=False)
class KvSlot:
    """One llama.cpp sequence id and the tokens whose KV it holds at positions 0..len-1."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    cells: list[int] = field(default_factory=list)
    busy: bool = True  # False: a finished sequence kept only as a cached prefix
    last_used: int = 0
    proven: int = 0  # leading tokens a later prompt reused, or would have: kept regardless of the retention budget
    prompt_len: int = 0  # tokens of the prompt this sequence was started for
    shared: int = 0  # leading tokens that prompts branching off inside another's prompt reused (a system prompt)
    adapter: str = ""  # the LoRA adapter its KV was computed under: only prompts under the same one may reuse it

    def __len__(self) -> int:
        return len(self.tokens)


class KvCache:
    """Hands out sequence ids and keeps the cell accounting; executes memory ops on the runner."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        runner.clear()  # this cache's accounting starts from empty memory
        self.n_cells = runner.n_ctx
        self._free_ids = list(range(runner.n_seq_max - 1, -1, -1))
        self._refs: dict[int, int] = {}
        self._next_cell = 0
        self.slots: dict[int, KvSlot] = {}

    @property
    def memory(self) -> ModelMemory:
        return self.runner.memory

    def held(self, slot: KvSlot) -> HeldPositions:
        return self.runner.held(slot.seq_id)

    def resumable(self, slot: KvSlot, length: int) -> bool:
        """May a sequence go on from `slot`'s first `length` positions (forked, or `slot` cut back to them)? Always,
        unless the model's memory keeps less than every position (a sliding window, recurrent layers)."""
        return self.memory.plain or resumable(self.memory, self.held(slot), length)

    @property
    def used_cells(self) -> int:
        return len(self._refs)

    @property
    def free_cells(self) -> int:
        return self.n_cells - self.used_cells

    @property
    def has_free_id(self) -> bool:
        return bool(self._free_ids)

    def open(self) -> KvSlot:
        """A new empty sequence. Callers check `has_free_id` (or evict) first."""
        slot = KvSlot(self._free_ids.pop())
        self.slots[slot.seq_id] = slot
        return slot

    def fork(self, source: KvSlot, length: int, into: KvSlot) -> None:
        """Make `into` (empty) share the first `length` positions of `source`."""
        assert not into.tokens and length <= len(source)
        self.runner.copy(source.seq_id, into.seq_id, length)
        into.tokens = source.tokens[:length]
        into.cells = source.cells[:length]
        for cell in into.cells:
            self._refs[cell] += 1

    def extend(self, slot: KvSlot, tokens: list[int]) -> None:
        """Record that a decode wrote `tokens` into fresh cells of `slot`."""
        start = self._next_cell
        self._next_cell += len(tokens)
        slot.tokens.extend(tokens)
        slot.cells.extend(range(start, self._next_cell))
        self._refs.update(dict.fromkeys(range(start, self._next_cell), 1))

    def save(self, slot: KvSlot, start: int = 0) -> SeqState:
        """The KV of `slot`'s positions from `start` on, copied to host memory."""
        return self.runner.save(slot.seq_id, start)

    def restore(self, slot: KvSlot, tokens: list[int], state: SeqState, base: int = 0) -> bool:
        """Write back a saved state (the KV of `tokens[base:]`) into `slot`, which holds exactly `tokens[:base]`
        (empty, or a shared prefix forked into it), in fresh cells."""
        assert slot.tokens == tokens[:base]
        if len(tokens) - base > self.free_cells or not self.runner.restore(slot.seq_id, state):
            return False
        self.extend(slot, tokens[base:])
        return True

    def release(self, slot: KvSlot) -> None:
        """Drop the whole sequence: its id is free again and cells no other sequence holds are freed."""
        self.runner.remove(slot.seq_id, 0)
        self._unref(slot.cells)
        slot.tokens, slot.cells = [], []
        del self.slots[slot.seq_id]
        self._free_ids.append(slot.seq_id)

    def truncate(self, slot: KvSlot, length: int) -> None:
        """Keep only the first `length` positions of `slot`; cells no other sequence holds are freed."""
        self.runner.remove(slot.seq_id, length)
        self._unref(slot.cells[length:])
        del slot.tokens[length:], slot.cells[length:]

    def _unref(self, cells: list[int]) -> None:
        refs = self._refs
        for cell in cells:
            count = refs[cell] - 1
            if count:
                refs[cell] = count
            else:
                del refs[cell]
