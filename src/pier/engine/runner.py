"""The interface between the engine and a model: one forward pass over a batch, KV memory ops, the vocabulary.

The engine only talks to this protocol, so it runs the same over llama.cpp (`LlamaRunner`) and over the
deterministic `FakeRunner` that most tests use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import llama_cpp
import numpy as np

from pier.engine.model_memory import HeldPositions, ModelMemory

SeqState = bytes | bytearray  # one sequence's KV as the runner saved it (opaque to the engine)
LLAMA_MAX_SEQ = 256  # llama.cpp's limit on sequence ids in one context (src/llama-cparams.h)


class KvCacheFull(Exception):
    """llama_decode found no free KV cells for the batch (it returned 1); nothing was changed."""


@dataclass
class Batch:
    """One llama_decode's input. Tokens of one sequence are consecutive and in position order."""

    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    seq_ids: list[int] = field(default_factory=list)
    outputs: list[bool] = field(default_factory=list)
    adapters: list[str] = field(default_factory=list)  # each row's LoRA adapter ("" = the base model)

    def add(self, seq_id: int, start: int, tokens: list[int], want_logits: bool, every: bool = False,
            adapter: str = "") -> None:
        """Append `tokens` of `seq_id` at positions start.. ; the last one asks for logits when `want_logits`, and
        every one of them when `every` (a prompt's log-probabilities)."""
        self.adapters.extend([adapter] * len(tokens))
        self.tokens.extend(tokens)
        self.positions.extend(range(start, start + len(tokens)))
        self.seq_ids.extend([seq_id] * len(tokens))
        self.outputs.extend([every] * (len(tokens) - 1))
        self.outputs.append(want_logits or every)

    def __len__(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class ModelInfo:
    """What the servers need to know about the loaded model."""

    name: str
    path: str
    n_vocab: int
    n_ctx_train: int
    bos: int
    eos: int
    add_bos: bool
    chat_template: str | None
    n_params: int = 0
    size_bytes: int = 0
    devices: tuple[str, ...] = ("CPU",)  # where the weights and KV cache are: llama.cpp's devices, as shown

    @property
    def device_type(self) -> str:
        """TGI's model_device_type: "cpu", or the GPU backend's name in lower case ("cuda", "vulkan", "metal")."""
        first = self.devices[0] if self.devices else "CPU"
        return first.split(" ", 1)[0].rstrip("0123456789").lower()


class ModelRunner(Protocol):
    """Executes forward passes. Only the engine thread calls decode and the memory ops."""

    info: ModelInfo
    n_ctx: int  # KV cells (unified across all sequences)
    n_seq_max: int  # sequence ids 0..n_seq_max-1
    n_batch: int  # most tokens one decode takes
    memory: ModelMemory  # what the model's memory keeps of a sequence: which prefixes can be continued

    def tokenize(self, text: str, add_bos: bool, special: bool) -> list[int]: ...

    def piece(self, token: int) -> bytes: ...

    def is_eog(self, token: int) -> bool: ...

    @property
    def vocab(self) -> llama_cpp.llama_vocab_p:
        """The llama.cpp vocabulary whose pieces are this runner's (what a grammar sampler reads)."""
        ...

    def decode(self, batch: Batch) -> np.ndarray:
        """Run the batch; return logits, one row per token whose output flag is set, in batch order.
        The array is only valid until the next decode. Raises KvCacheFull (no cells), or RuntimeError when
        llama_decode refuses or fails the batch; either way nothing was written."""
        ...

    def remove(self, seq_id: int, start: int = 0) -> None:
        """Drop positions >= start of seq_id from the KV memory."""
        ...

    def held(self, seq_id: int) -> HeldPositions:
        """The positions the memory holds for seq_id now (llama_memory_seq_pos_min and _max): with a sliding window
        or recurrent layers, less than the sequence's tokens (engine/model_memory.py)."""
        ...

    def copy(self, src: int, dst: int, length: int) -> None:
        """Let dst share src's KV for positions [0, length) (metadata only in a unified cache)."""
        ...

    def save(self, seq_id: int, start: int = 0) -> SeqState:
        """Copy the KV of seq_id's positions from `start` on to host memory (llama_state_seq_get_data): from a
        shared prefix on, the part no other sequence holds."""
        ...

    def restore(self, seq_id: int, state: SeqState) -> bool:
        """Write a saved state back at the positions it was saved from, in cells no sequence holds. seq_id holds
        exactly the positions before them: none for a state saved from position 0, the shared prefix (forked)
        for one saved from further on. False, with seq_id unchanged, when there are too few free cells."""
        ...

    def clear(self) -> None:
        """Forget every sequence's KV (a new engine starts from an empty cache)."""
        ...

    def close(self) -> None: ...
