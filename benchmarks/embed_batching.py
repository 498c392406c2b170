"""What packing many inputs into one llama_decode buys the embedder: inputs per second for the same inputs
embedded one decode per input, and packed (every input of every waiting request in the fewest decodes).

    python benchmarks/embed_batching.py              # a SMALL-shaped (27M) mean-pooling model, 2 threads

Rounds alternate the two ways, so the host's drift hits both alike; the ratio is of the medians.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pier.bench.compare import ratio_of_medians
from pier.engine.embedder import Embedder
from pier.synthetic.builder import SMALL, build_gguf
from pier.synthetic.words import WORDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--words", type=int, default=24, help="words per input")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        gguf = build_gguf(Path(folder) / "embed.gguf", SMALL, quant="Q8_0", pooling="mean")
        embedder = Embedder(gguf, n_ctx=2048, n_seq_max=64, n_threads=args.threads)
        texts = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(args.words)) for i in range(args.inputs)]
        inputs = [embedder.tokenize(t) for t in texts]
        alone: list[float] = []
        packed: list[float] = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for tokens in inputs:
                embedder.embed([tokens]).result()
            alone.append(len(inputs) / (time.perf_counter() - started))
            started = time.perf_counter()
            embedder.embed(inputs).result()
            packed.append(len(inputs) / (time.perf_counter() - started))
        embedder.stop()
    tokens = sum(len(t) for t in inputs)
    print(f"{len(inputs)} inputs of {tokens / len(inputs):.0f} tokens, {args.threads} threads, {args.rounds} rounds")
    print(f"one decode per input: {sorted(alone)[len(alone) // 2]:8.1f} inputs/s")
    print(f"packed:               {sorted(packed)[len(packed) // 2]:8.1f} inputs/s")
    print(f"packed / one per input: {ratio_of_medians(packed, alone)}")


if __name__ == "__main__":
    main()
