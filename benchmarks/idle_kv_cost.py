"""What idle KV cells cost a decode step in llama.cpp's unified cache (why pier budgets its idle prefixes).

    python benchmarks/idle_kv_cost.py                     # B = 1, 4, 8; idle cells 0, 768, 1792, 2560

llama.cpp attends over every cell up to the highest one in use, so cells held by a finished prompt slow down
every running sequence until they are freed. The script loads one context per idle-cell count (the model's
pages are shared), fills each with that many idle cells plus B running sequences of 64 tokens, then decodes
B tokens per step, rotating over the contexts step by step so the host's drift hits them all alike.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from common import bench_model

from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch

PROMPT = 64
IDLE_SEQ = 31


def random_tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(300, 32000) for _ in range(n)]


def prefill(runner: LlamaRunner, seq_id: int, n: int, rng: random.Random) -> None:
    for start in range(0, n, runner.n_batch):
        batch = Batch()
        batch.add(seq_id, start, random_tokens(rng, min(runner.n_batch, n - start)), want_logits=False)
        runner.decode(batch)


def measure(model: str, batch_size: int, idle_counts: list[int], steps: int) -> dict[int, float]:
    rng = random.Random(batch_size)
    runners = {}
    for idle in idle_counts:
        runner = LlamaRunner(model, n_ctx=4096, n_seq_max=32, n_batch=512, n_threads=2)
        prefill(runner, IDLE_SEQ, idle, rng)
        for seq in range(batch_size):
            prefill(runner, seq, PROMPT, rng)
        runners[idle] = runner
    times: dict[int, list[float]] = {idle: [] for idle in idle_counts}
    for step in range(steps):
        for idle, runner in runners.items():
            batch = Batch()
            for seq in range(batch_size):
                batch.add(seq, PROMPT + step, random_tokens(rng, 1), want_logits=True)
            began = time.perf_counter()
            runner.decode(batch)
            times[idle].append(time.perf_counter() - began)
    for runner in runners.values():
        runner.close()
    return {idle: statistics.median(t) for idle, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to use (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--batches", default="1,4,8")
    parser.add_argument("--idle", default="0,768,1792,2560", help="idle cell counts (first one is the baseline)")
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    model = args.model or str(bench_model())
    idle_counts = [int(n) for n in args.idle.split(",")]
    print("| B | idle cells | decode step median ms | vs no idle cells |")
    print("|---|---|---|---|")
    for b in (int(n) for n in args.batches.split(",")):
        medians = measure(model, b, idle_counts, args.steps)
        base = medians[idle_counts[0]]
        for idle, median in medians.items():
            print(f"| {b} | {idle} | {median * 1000:.1f} | {median / base:.3f}x |")


if __name__ == "__main__":
    main()
