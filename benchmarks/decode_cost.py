"""What one llama_decode step costs on this CPU: by tokens in the step, and by idle KV cells in the cache.

    python benchmarks/decode_cost.py                 # both tables, the 360M-class Q4_0 model, 2 threads

1. Tokens per step: one sequence feeds n tokens at once (n = 1 is a decode, larger n a prompt chunk); the
   cost per token shows how much batching can gain at all, and where it stops (the CPU is compute-bound).
   The same table compares B sequences decoding one token each with one sequence feeding B tokens.
2. Idle cells: llama.cpp attends over every cell up to the highest one in use, so cells a finished prompt
   holds slow every running sequence (why pier budgets its idle prefixes). One context per idle-cell count
   (the model's pages are shared), each with B running sequences of 64 tokens; steps rotate over the
   contexts so the host's drift hits them all alike.
"""

from __future__ import annotations

import argparse
import random
import time

from common import bench_model

from pier.bench.compare import ratio_of_medians
from pier.bench.metrics import Distribution
from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch

PROMPT = 64
IDLE_SEQ = 31


class Decoder:
    """A context and random tokens to feed it, timing every decode."""

    def __init__(self, model: str, seed: int) -> None:
        self.runner = LlamaRunner(model, n_ctx=4096, n_seq_max=32, n_batch=512, n_threads=2)
        self.rng = random.Random(seed)
        self.positions: dict[int, int] = {}

    def feed(self, feeds: dict[int, int]) -> float:
        """One decode: sequence id -> tokens it feeds. Returns the seconds it took."""
        batch = Batch()
        for seq, n in feeds.items():
            start = self.positions.get(seq, 0)
            batch.add(seq, start, [self.rng.randrange(300, 32000) for _ in range(n)], want_logits=True)
            self.positions[seq] = start + n
        began = time.perf_counter()
        self.runner.decode(batch)
        return time.perf_counter() - began

    def prefill(self, seq: int, n: int) -> None:
        for chunk in range(0, n, self.runner.n_batch):
            self.feed({seq: min(self.runner.n_batch, n - chunk)})

    def restart(self) -> None:
        self.runner.clear()
        self.positions.clear()


def tokens_per_step(model: str, sizes: list[int], repeats: int) -> None:
    decoder = Decoder(model, seed=0)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            decoder.restart()
            decoder.prefill(0, PROMPT)
            times[n].append(decoder.feed({1: n}))
    print("| tokens in the step (one sequence) | step ms (median) | ms per token |")
    print("|---|---|---|")
    for n, samples in times.items():
        median = Distribution.of(samples).median
        print(f"| {n} | {median * 1000:.1f} | {median / n * 1000:.2f} |")
    decoder.restart()
    for seq in range(9):
        decoder.prefill(seq, PROMPT)
    spread, single = [], []
    for _ in range(40):
        spread.append(decoder.feed(dict.fromkeys(range(8), 1)))
        single.append(decoder.feed({8: 8}))
    print(
        f"\n8 sequences x 1 token: {Distribution.of(spread).median * 1000:.1f} ms per step; "
        f"1 sequence x 8 tokens: {Distribution.of(single).median * 1000:.1f} ms (medians of 40 alternating steps)\n"
    )
    decoder.runner.close()


def idle_cells(model: str, batch_size: int, idle_counts: list[int], steps: int) -> dict[int, list[float]]:
    """Seconds of every decode step, by idle cell count."""
    decoders = {}
    for idle in idle_counts:
        decoder = Decoder(model, seed=batch_size)
        decoder.prefill(IDLE_SEQ, idle)
        for seq in range(batch_size):
            decoder.prefill(seq, PROMPT)
        decoders[idle] = decoder
    times: dict[int, list[float]] = {idle: [] for idle in idle_counts}
    for _ in range(steps):
        for idle, decoder in decoders.items():
            times[idle].append(decoder.feed(dict.fromkeys(range(batch_size), 1)))
    for decoder in decoders.values():
        decoder.runner.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to use (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--sizes", default="1,4,8,16,32,64,128,256,512", help="tokens per step to time")
    parser.add_argument("--batches", default="1,4,8", help="running sequences, for the idle-cell table")
    parser.add_argument("--idle", default="0,768,1792,2560", help="idle cell counts (the first is the baseline)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    model = args.model or str(bench_model())
    tokens_per_step(model, [int(n) for n in args.sizes.split(",")], args.repeats)
    idle_counts = [int(n) for n in args.idle.split(",")]
    print("| running sequences | idle cells | decode step ms (median) | vs no idle cells |")
    print("|---|---|---|---|")
    for b in (int(n) for n in args.batches.split(",")):
        times = idle_cells(model, b, idle_counts, args.steps)
        for idle, samples in times.items():
            slower = ratio_of_medians(samples, times[idle_counts[0]])
            print(
                f"| {b} | {idle} | {Distribution.of(samples).median * 1000:.1f} | "
                f"{'n/a' if slower is None else f'{slower:.3f}x'} |"
            )


if __name__ == "__main__":
    main()
