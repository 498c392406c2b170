"""What the KV cache type buys and costs: conversations held in a given memory, and the speed of each type.

    python benchmarks/kv_types.py                    # the 360M-class Q4_0 model, 2 threads, 1 GiB of KV
    python benchmarks/kv_types.py --kv-mb 512 --context 2048 --rounds 30

1. Memory: the cells PIER_KV_CACHE_MB buys with each type (pier.server.kv_budget, from the GGUF header) and
   so the concurrent conversations of --context tokens one copy holds; each context is then created in
   llama.cpp at that size, and a saved sequence's bytes per token (what the host-memory tier stores) are read
   back, to show the sizing is llama.cpp's own.
2. Speed: one context per type (the model's pages are shared), each with 8 sequences of 256 prompt tokens;
   prefill is timed per type, then decode steps of the 8 sequences rotate over the types round by round, so
   the host's drift hits them all alike. Medians and ratios to f16.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from common import bench_model

from pier.engine.kv_type import KV_TYPE_NAMES
from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch
from pier.server.kv_budget import kv_cells, kv_shape
from pier.server.settings import ServerSettings

TYPES = tuple(t for t in KV_TYPE_NAMES if t != "f32")
SEQS, PROMPT = 8, 256


def memory(model: Path, kv_mb: int, context: int) -> None:
    shape = kv_shape(model)
    print(f"| KV type | bytes per cell | cells in {kv_mb} MiB | {context}-token conversations | saved bytes per "
          "token (llama.cpp) |")
    print("|---|---|---|---|---|")
    for kv_type in TYPES:
        cells = kv_cells(ServerSettings.from_env({"PIER_KV_CACHE_MB": str(kv_mb), "PIER_KV_CACHE_TYPE": kv_type}),
                         model)
        runner = LlamaRunner(model, n_ctx=cells, n_seq_max=4, n_batch=512, n_threads=2, kv_type=kv_type)
        try:
            runner.decode(Batch(list(range(300, 556)), list(range(256)), [0] * 256, [False] * 255 + [True]))
            per_token = len(runner.save(0)) / 256
            print(f"| {kv_type} | {shape.cell_bytes(kv_type)} | {runner.n_ctx} | {runner.n_ctx // context} | "
                  f"{per_token:.0f} |")
        finally:
            runner.close()


def speed(model: Path, rounds: int) -> None:
    rng = random.Random(0)
    runners = {t: LlamaRunner(model, n_ctx=4096, n_seq_max=SEQS, n_batch=512, n_threads=2, kv_type=t) for t in TYPES}
    prefill: dict[str, float] = {}
    try:
        for kv_type, runner in runners.items():
            began = time.perf_counter()
            for seq in range(SEQS):
                tokens = [rng.randrange(300, 32000) for _ in range(PROMPT)]
                runner.decode(Batch(tokens, list(range(PROMPT)), [seq] * PROMPT, [False] * (PROMPT - 1) + [True]))
            prefill[kv_type] = SEQS * PROMPT / (time.perf_counter() - began)
        steps: dict[str, list[float]] = {t: [] for t in TYPES}
        for step in range(rounds):
            for kv_type in TYPES if step % 2 == 0 else TYPES[::-1]:
                batch = Batch([rng.randrange(300, 32000) for _ in range(SEQS)], [PROMPT + step] * SEQS,
                              list(range(SEQS)), [True] * SEQS)
                began = time.perf_counter()
                runners[kv_type].decode(batch)
                steps[kv_type].append(time.perf_counter() - began)
    finally:
        for runner in runners.values():
            runner.close()
    base = statistics.median(steps["f16"])
    print(f"| KV type | prefill tok/s ({SEQS} x {PROMPT}) | decode step ms, {SEQS} sequences (median, min-max) | "
          "decode tok/s | vs f16 |")
    print("|---|---|---|---|---|")
    for kv_type in TYPES:
        median = statistics.median(steps[kv_type])
        print(f"| {kv_type} | {prefill[kv_type]:.0f} | {median * 1000:.1f} ({min(steps[kv_type]) * 1000:.1f}–"
              f"{max(steps[kv_type]) * 1000:.1f}) | {SEQS / median:.1f} | {base / median:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--kv-mb", type=int, default=1024, help="KV memory per copy (PIER_KV_CACHE_MB)")
    parser.add_argument("--context", type=int, default=2048, help="tokens of one conversation")
    parser.add_argument("--rounds", type=int, default=30, help="decode steps per type")
    args = parser.parse_args()
    model = Path(args.model) if args.model else bench_model()
    memory(model, args.kv_mb, args.context)
    print()
    speed(model, args.rounds)


if __name__ == "__main__":
    main()
