"""One sequence's failure is that sequence's alone: a step whose llama_decode fails is run again in halves.

llama_decode refuses a whole batch when one sequence's rows do not fit what the memory holds for it (status -1:
"inconsistent sequence positions"), and a failed compute fails every row. Without isolation every sequence of the
step got an error. `decode_apart` runs the step as one pass first (the only cost when nothing fails); when that
fails, it runs each half apart, and each failing half's halves, until each failing part is alone: the parts that
ran keep their logits and cells, the ones that fail alone are handed back to the engine (which retries one once
from an empty slot, then fails it alone: core.py). A step with one bad sequence among n costs about 2 log2 n more
passes, once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pier.engine.runner import Batch, KvCacheFull, ModelRunner


@dataclass(frozen=True, eq=False)  # each part is itself: the engine maps parts back to their sequences
class Part:
    """One sequence's rows in a step: `tokens` at positions from `start`; logits for the last one when
    `want_logits`, for every one when `every`."""

    seq_id: int
    start: int
    tokens: list[int]
    want_logits: bool
    every: bool
    adapter: str = ""

    @property
    def n_rows(self) -> int:
        return len(self.tokens) if self.every else int(self.want_logits)


@dataclass
class ApartDecode:
    """The parts that ran, in the step's order, their logits rows in the same order, and the parts that failed
    alone with their errors."""

    ran: list[Part]
    logits: np.ndarray
    failed: list[tuple[Part, RuntimeError]]


def batch_of(parts: list[Part]) -> Batch:
    batch = Batch()
    for part in parts:
        batch.add(part.seq_id, part.start, part.tokens, want_logits=part.want_logits, every=part.every,
                  adapter=part.adapter)
    return batch


def decode_apart(runner: ModelRunner, parts: list[Part], n_vocab: int) -> ApartDecode:
    """Decode the parts as one pass; if llama_decode fails, apart (module docstring). KvCacheFull means nothing
    was written, as from `runner.decode`: the parts that had run are taken back first."""
    try:
        return ApartDecode(parts, runner.decode(batch_of(parts)), [])
    except RuntimeError as error:
        if len(parts) == 1:
            return ApartDecode([], np.empty((0, n_vocab), np.float32), [(parts[0], error)])
    return _halves(runner, parts, n_vocab)


def _halves(runner: ModelRunner, parts: list[Part], n_vocab: int) -> ApartDecode:
    middle = len(parts) // 2
    done = ApartDecode([], np.empty((0, n_vocab), np.float32), [])
    try:
        for half in (parts[:middle], parts[middle:]):
            try:
                logits = np.array(runner.decode(batch_of(half)))  # a copy: the next decode overwrites them
                part = ApartDecode(half, logits, [])
            except RuntimeError as error:
                part = (ApartDecode([], np.empty((0, n_vocab), np.float32), [(half[0], error)]) if len(half) == 1
                        else _halves(runner, half, n_vocab))
            logits = np.concatenate([done.logits, part.logits])
            done = ApartDecode(done.ran + part.ran, logits, done.failed + part.failed)
    except KvCacheFull:
        for ran in done.ran:
            runner.remove(ran.seq_id, ran.start)
        raise
    return done
