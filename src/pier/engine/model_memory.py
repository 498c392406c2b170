"""What a model's memory keeps of a sequence, and so which of its prefixes another sequence may go on from.

A plain transformer keeps the K and V of every position, so any prefix of any sequence can be forked (`seq_cp`)
and continued. Two kinds of memory keep less:

- **Sliding-window attention** (Gemma 2/3, Mistral's SWA, Cohere 2, ...; llama.cpp's iSWA cache): the window
  layers of a token at position p attend only to the last `window` positions. llama.cpp reuses a cell that every
  later token of its sequence would mask (overwritten in place by any sequence's new token, and then everything
  of that sequence below it is purged, so each sequence holds one run of positions), and a saved state leaves the
  masked cells out. So a sequence that has run past position p + window may no longer hold position p, and a
  prefix of it that ends near p cannot be continued: the next token's window is gone. llama.cpp's
  `llama_memory_seq_pos_min` says where a sequence's run starts now.
- **Recurrent and hybrid models** (Mamba, RWKV, Jamba, Granite 4, LFM2, ...): the recurrent layers keep one state,
  after the sequence's last position. Only a sequence's whole length can be continued.

`resumable` decides from what llama.cpp reports a sequence holds (`HeldPositions`), so the prefix cache never
hands a sequence a prefix whose KV is not all there (which made `llama_decode` fail the whole step, or computed
from a window with holes). llama-server decides the same way: it re-processes the whole prompt "due to lack of
cache data" when the slot's `pos_min` is past what the next token needs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelMemory:
    """`window`: the sliding window of the model's window layers in positions (llama.cpp's `n_swa`; 0 = none).
    `recurrent`: the model has recurrent layers (recurrent or hybrid), whose state exists only after a sequence's
    last position."""

    window: int = 0
    recurrent: bool = False

    @property
    def plain(self) -> bool:
        """Every position of every sequence is kept: any prefix can be forked and continued."""
        return self.window <= 0 and not self.recurrent


PLAIN = ModelMemory()


@dataclass(frozen=True)
class HeldPositions:
    """The positions a sequence's memory holds, as llama.cpp reports them (`llama_memory_seq_pos_min` and `_max`):
    every position from `first` to `last`; (-1, -1) when it holds none."""

    first: int
    last: int

    @property
    def empty(self) -> bool:
        return self.last < 0


NOTHING = HeldPositions(-1, -1)


def first_needed(memory: ModelMemory, length: int) -> int:
    """The lowest position the token at position `length` (the first one computed after a reused prefix of `length`
    tokens) needs the memory to hold. A token at p sees positions p - window + 1 .. p in a window layer (llama.cpp's
    standard window; a chunked one, Llama 4's, sees no further back, so this is safe for it too)."""
    if memory.recurrent:
        return length - 1  # the state after the prefix's last token
    if memory.window > 0:
        return max(0, length - memory.window + 1)
    return 0


def resumable(memory: ModelMemory, held: HeldPositions, length: int) -> bool:
    """May a sequence whose memory holds `held` go on from its first `length` positions (a fork of them, or itself
    cut back to them)? Its memory must hold the prefix's last position and everything the next token needs; a
    recurrent state must be exactly the one after the prefix (it cannot be cut back)."""
    if length <= 0:
        return True
    if held.empty or held.last < length - 1:
        return False
    if memory.recurrent and held.last != length - 1:
        return False
    return held.first <= first_needed(memory, length)


def saved_first(memory: ModelMemory, length: int) -> int:
    """The lowest position a saved state of a sequence of `length` positions holds in every layer: llama.cpp leaves
    out the cells a window layer masks for the sequence's next token (`llama_state_seq_get_data`), and a recurrent
    state is the one after the last position."""
    if memory.recurrent:
        return max(0, length - 1)
    if memory.window > 0:
        return max(0, length - memory.window)
    return 0
