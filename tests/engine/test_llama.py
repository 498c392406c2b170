"""LlamaRunner on a real GGUF: a step cut into several forward passes gives every row the logits it would get
alone, in batch order, and a pass that finds no room takes back what the earlier passes wrote."""

from __future__ import annotations

import random
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from pier.engine.llama import LlamaRunner
from pier.engine.passes import plan_passes
from pier.engine.runner import Batch, KvCacheFull

pytestmark = pytest.mark.e2e
DECODING = 8


def tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(10, 2000) for _ in range(n)]


def with_histories(runner: LlamaRunner, rng: random.Random, history: int) -> None:
    for seq in range(DECODING):
        batch = Batch()
        batch.add(seq, 0, tokens(rng, history), want_logits=False)
        runner.decode(batch)


def decode_rows(rng: random.Random, position: int, batch: Batch | None = None) -> Batch:
    """One decode row for each of the DECODING sequences, at `position`, appended to `batch` or a new one."""
    batch = batch or Batch()
    for seq in range(DECODING):
        batch.add(seq, position, tokens(rng, 1), want_logits=True)
    return batch


def last_position(runner: LlamaRunner, seq: int) -> int:
    return int(llama_cpp.llama_memory_seq_pos_max(llama_cpp.llama_get_memory(runner._ctx), seq))


def test_a_step_of_several_passes_matches_each_sequence_alone(tiny_gguf: Path) -> None:
    rng = random.Random(7)
    runner = LlamaRunner(tiny_gguf, n_ctx=1024, n_seq_max=16, n_batch=256, n_threads=2)
    try:
        with_histories(runner, rng, history=20)
        step = Batch()
        step.add(DECODING, 0, tokens(rng, 100), want_logits=True, every=True)  # a prompt with all its logits
        decode_rows(rng, 20, step)  # after it in the batch, but run first: logits must come back in batch order
        assert [p[0] for p in plan_passes(step.seq_ids, tiled=True)] == [100, 0]
        together = runner.decode(step).copy()

        runner.clear()
        rng = random.Random(7)
        with_histories(runner, rng, history=20)
        alone: dict[int, np.ndarray] = {}
        for seq in range(DECODING + 1):  # the order the passes ran in, so the cells land where they did
            rows = [i for i, s in enumerate(step.seq_ids) if s == seq]
            one = Batch()
            one.add(seq, step.positions[rows[0]], [step.tokens[i] for i in rows], want_logits=True,
                    every=seq == DECODING)
            alone[seq] = runner.decode(one).copy()
    finally:
        runner.close()
    expected = np.concatenate([alone[DECODING], *(alone[seq] for seq in range(DECODING))])  # batch order
    assert together.shape == expected.shape == (100 + DECODING, runner.info.n_vocab)
    np.testing.assert_allclose(together, expected, atol=2e-3, rtol=1e-3)


def test_a_pass_without_room_undoes_the_passes_before_it(tiny_gguf: Path) -> None:
    rng = random.Random(3)
    runner = LlamaRunner(tiny_gguf, n_ctx=256, n_seq_max=16, n_batch=256, n_threads=2)
    try:
        with_histories(runner, rng, history=10)
        step = decode_rows(rng, 10)
        step.add(DECODING, 0, tokens(rng, 256 - DECODING * 10 - 4), want_logits=True)  # the decode rows fit, it not
        with pytest.raises(KvCacheFull):
            runner.decode(step)
        assert [last_position(runner, seq) for seq in range(DECODING + 1)] == [9] * DECODING + [-1]
        assert runner.decode(decode_rows(rng, 10)).shape == (DECODING, runner.info.n_vocab)
    finally:
        runner.close()
