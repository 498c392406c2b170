"""What a step costs as one llama_decode and as pier cuts it (decode rows in passes of their own), issue 16.

    python benchmarks/passes.py [--repeats 3]

Steps on pier's `LlamaRunner` (the benchmark model, 2 threads, unified KV, flash attention llama.cpp's default):
  decode beside a prompt   8 chats of 300 history tokens and 24 replied tokens (decoded side by side) each bring
                           one decode row, a ninth chat of 300 history tokens brings a prompt chunk of P tokens
  decode only              N chats of H history tokens each bring one decode row, nothing else
Each step runs twice on the same state, once as one pass (`separate_decode_rows=False`, what llama-server does)
and once as `pier.engine.passes` plans it; the order alternates between repeats so drift hits both.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from common import bench_model

from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch

HISTORY, REPLIED, BESIDE = 300, 24, 8


@dataclass(frozen=True)
class Case:
    name: str
    n_ctx: int
    setup: Callable[[LlamaRunner, random.Random], None]
    step: Callable[[random.Random], Batch]


def tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100, 30000) for _ in range(n)]


def prefill(runner: LlamaRunner, rng: random.Random, chats: range, history: int) -> None:
    for chat in chats:
        for start in range(0, history, 256):
            batch = Batch()
            batch.add(chat, start, tokens(rng, min(256, history - start)), want_logits=False)
            runner.decode(batch)


def chats_replied(runner: LlamaRunner, rng: random.Random) -> None:
    prefill(runner, rng, range(BESIDE + 1), HISTORY)
    for position in range(HISTORY, HISTORY + REPLIED):
        batch = Batch()
        for chat in range(BESIDE):
            batch.add(chat, position, tokens(rng, 1), want_logits=True)
        runner.decode(batch)


def beside_prompt(prompt: int) -> Case:
    def step(rng: random.Random) -> Batch:
        batch = Batch()
        for chat in range(BESIDE):
            batch.add(chat, HISTORY + REPLIED, tokens(rng, 1), want_logits=True)
        batch.add(BESIDE, HISTORY, tokens(rng, prompt), want_logits=True)
        return batch

    return Case(f"{BESIDE} decode rows + a {prompt}-token prompt", 4096, chats_replied, step)


def decode_only(n: int, history: int) -> Case:
    def step(rng: random.Random) -> Batch:
        batch = Batch()
        for chat in range(n):
            batch.add(chat, history, tokens(rng, 1), want_logits=True)
        return batch

    return Case(f"{n} decode rows ({history}-token histories)", 8192,
                lambda runner, rng: prefill(runner, rng, range(n), history), step)


CASES = [beside_prompt(56), beside_prompt(120), beside_prompt(248), beside_prompt(504),
         decode_only(8, 300), decode_only(64, 100), decode_only(96, 60)]


def timed_step(model: str, case: Case, separate: bool, seed: int) -> float:
    runner = LlamaRunner(model, n_ctx=case.n_ctx, n_seq_max=128, n_batch=512, n_threads=2,
                         separate_decode_rows=separate)
    try:
        rng = random.Random(seed)
        case.setup(runner, rng)
        batch = case.step(rng)
        started = time.perf_counter()
        runner.decode(batch)
        return time.perf_counter() - started
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model = str(bench_model())
    times: dict[tuple[str, bool], list[float]] = {}
    for repeat in range(args.repeats):
        for case in CASES:
            for separate in (False, True) if repeat % 2 == 0 else (True, False):
                seconds = timed_step(model, case, separate, seed=repeat)
                times.setdefault((case.name, separate), []).append(seconds)
                print(f"repeat {repeat + 1} {case.name:42s} {'pier' if separate else 'one pass':8s} "
                      f"{seconds * 1000:7.1f} ms", flush=True)
    print(f"\nmedians of {args.repeats}\n")
    print("| step | one llama_decode ms | pier's passes ms | pier / one |\n|---|---|---|---|")
    for case in CASES:
        one = statistics.median(times[case.name, False])
        split = statistics.median(times[case.name, True])
        print(f"| {case.name} | {one * 1000:.0f} | {split * 1000:.0f} | {split / one:.2f}x |")


if __name__ == "__main__":
    main()
