"""What a prompt step costs depending on where its sequences' history sits in the KV cache (issue 16, multi-turn).

    python benchmarks/prompt_layout.py [--history 250] [--new 64] [--repeats 2]

Eight chats with HISTORY tokens each, then one step feeding NEW prompt tokens to every chat (8 x NEW tokens in one
`llama_decode`, pier's `LlamaRunner`: the benchmark model, 2 threads, 4,096 cells, unified KV). The histories are
laid out three ways:
  one run      each chat's history prefilled on its own: its cells are consecutive
  scattered    the eight histories decoded side by side, one token per chat per step, as when chats decode
               together: each chat holds one cell in every eight
  round trip   scattered, then each chat copied to host memory, removed, and written back
               (`llama_state_seq_get_data` / `set_data`, what pier does when a turn ends): timed too
llama.cpp's tiled flash attention (steps of 64+ tokens) skips a block of 64 queries x 64 cells only when no query
may see any cell of it, so scattered histories make it compute nearly every block. Layouts alternate so drift hits
all of them.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from common import bench_model

from pier.engine.llama import LlamaRunner
from pier.engine.runner import Batch

CHATS = 8
LAYOUTS = ("one run", "scattered", "round trip")


def random_tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(100, 30000) for _ in range(n)]


def prefill(runner: LlamaRunner, chat: int, tokens: list[int]) -> None:
    for start in range(0, len(tokens), 256):
        batch = Batch()
        batch.add(chat, start, tokens[start : start + 256], want_logits=False)
        runner.decode(batch)


def side_by_side(runner: LlamaRunner, rng: random.Random, history: int) -> None:
    for position in range(history):
        batch = Batch()
        for chat in range(CHATS):
            batch.add(chat, position, random_tokens(rng, 1), want_logits=False)
        runner.decode(batch)


def round_trip(runner: LlamaRunner) -> float:
    """Every chat out to host memory and back; returns the seconds it took."""
    started = time.perf_counter()
    saved = [runner.save(chat) for chat in range(CHATS)]
    for chat in range(CHATS):
        runner.remove(chat)
    for chat, state in enumerate(saved):
        if not runner.restore(chat, state):
            raise RuntimeError("no room to write a chat back: lower --history")
    return time.perf_counter() - started


def prompt_step(model: str, layout: str, history: int, new: int, seed: int) -> tuple[float, float]:
    """(seconds of the prompt step, seconds of the round trip or 0)."""
    rng = random.Random(seed)
    runner = LlamaRunner(model, n_ctx=4096, n_seq_max=CHATS, n_batch=CHATS * new, n_threads=2)
    try:
        if layout == "one run":
            for chat in range(CHATS):
                prefill(runner, chat, random_tokens(rng, history))
        else:
            side_by_side(runner, rng, history)
        copies = round_trip(runner) if layout == "round trip" else 0.0
        batch = Batch()
        for chat in range(CHATS):
            batch.add(chat, history, random_tokens(rng, new), want_logits=True)
        started = time.perf_counter()
        runner.decode(batch)
        return time.perf_counter() - started, copies
    finally:
        runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=250, help="tokens of history per chat")
    parser.add_argument("--new", type=int, default=64, help="new prompt tokens per chat in the timed step")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if CHATS * (args.history + args.new) > 4096:
        parser.error("8 x (history + new) must fit in 4,096 cells")
    model = str(bench_model())
    steps: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
    copies: list[float] = []
    for repeat in range(args.repeats):
        for layout in LAYOUTS if repeat % 2 == 0 else LAYOUTS[::-1]:
            step, copy = prompt_step(model, layout, args.history, args.new, seed=repeat)
            steps[layout].append(step)
            if layout == "round trip":
                copies.append(copy)
            print(f"repeat {repeat + 1} {layout:10s}: prompt step {step * 1000:7.1f} ms", flush=True)
    base = statistics.median(steps["one run"])
    print(f"\n{CHATS} chats x {args.history} history tokens, a step of {CHATS} x {args.new} new tokens "
          f"(medians of {args.repeats})\n")
    print("| history layout | prompt step ms | vs one run |\n|---|---|---|")
    for layout in LAYOUTS:
        median = statistics.median(steps[layout])
        print(f"| {layout} | {median * 1000:.0f} | {median / base:.2f}x |")
    print(f"\nround trip of {CHATS} x {args.history} tokens (out to host memory and back): "
          f"{statistics.median(copies) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
