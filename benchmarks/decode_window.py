"""What one decode step of 8 chats costs in pier's llama.cpp context, and whether it depends on what pier keeps
there beside them: the number of sequence ids the context reserves, and idle prefixes in cells above the chats'.

    python benchmarks/decode_window.py [HISTORY]        # HISTORY tokens per chat (default 450)

Eight sequences of HISTORY random tokens are prefilled, optionally followed by idle prefixes in other sequence ids
(their cells sit above the chats', so every step's attention window spans them), then 24 decode steps of one token
per chat are timed (median of the last 20). Contexts alternate so drift hits both sides.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from common import bench_model

from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch

HIST = int(sys.argv[1]) if len(sys.argv) > 1 else 450
rng = random.Random(0)
MODEL = str(bench_model())

def prefill(runner: LlamaRunner, seq_id: int, tokens: list[int]) -> None:
    for start in range(0, len(tokens), 256):
        batch = Batch()
        batch.add(seq_id, start, tokens[start:start + 256], want_logits=False)
        runner.decode(batch)


def random_tokens(n: int) -> list[int]:
    return [rng.randrange(100, 30000) for _ in range(n)]


def run(n_seq_max: int, idle: int) -> float:
    """The median decode step (ms) of 8 chats in a context of `n_seq_max` ids with `idle` idle cells above."""
    runner = LlamaRunner(MODEL, n_ctx=4096, n_seq_max=n_seq_max, n_batch=512, n_threads=2)
    for chat in range(8):
        prefill(runner, chat, random_tokens(HIST))
    for k in range(idle // 256):  # idle prefixes in further sequence ids, above the chats' cells
        prefill(runner, 8 + k, random_tokens(256))
    times = []
    for step in range(24):
        batch = Batch()
        for chat in range(8):
            batch.add(chat, HIST + step, random_tokens(1), want_logits=True)
        started = time.perf_counter()
        runner.decode(batch)
        times.append(time.perf_counter() - started)
    runner.close()
    return statistics.median(times[4:]) * 1000


if __name__ == "__main__":
    idle_cells = (4096 - 8 * (HIST + 24)) // 256 * 256  # as many idle cells as the context still holds
    for nsm, idle in [(8, 0), (256, 0), (256, idle_cells)] * 3:
        print(f"n_seq_max {nsm:3d}, idle cells {idle:4d}: decode step of 8 = {run(nsm, idle):.1f} ms", flush=True)
