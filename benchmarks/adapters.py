"""Throughput with 8 LoRA adapters mixed in one batch against the base model alone (issue 29).

    python benchmarks/adapters.py [--shape small|bench] [--requests 16] [--repeats 3]

pier's engine (`EngineCore` on `LlamaRunner`, 2 threads, 8 parallel sequences, prefix cache off) runs the same
requests (distinct random 64-token prompts, 64 greedy tokens each) three ways:
  base          every request on the base model: one pass per step
  one adapter   every request under the same adapter: one pass per step, plus the adapter's matmuls
  8 adapters    request i under adapter i % 8: each step cut into one pass per adapter (engine/passes.py)
Adapters: rank 16 on attn_q, attn_v, ffn_up and ffn_down of every layer, F32 (pier.synthetic.lora). The order
of the cases rotates between repeats so drift hits each; medians are printed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from common import bench_model, model_cache

from pier.engine.core import EngineCore
from pier.engine.engine_config import EngineConfig
from pier.engine.llama import LlamaRunner
from pier.engine.request import GenerateRequest, SamplingParams
from pier.synthetic.builder import BENCH_360M, SMALL, ModelShape, build_gguf
from pier.synthetic.lora import build_lora_gguf

N_ADAPTERS, RANK, PROMPT, OUT, PARALLEL = 8, 16, 64, 64, 8
GREEDY = SamplingParams(temperature=0.0)


def files(shape_name: str) -> tuple[Path, ModelShape, list[Path]]:
    cache = model_cache()
    cache.mkdir(parents=True, exist_ok=True)
    if shape_name == "bench":
        model, shape = bench_model(), BENCH_360M
    else:
        model, shape = cache / "small-q4_0.gguf", SMALL
        if not model.exists():
            build_gguf(model, SMALL, quant="Q4_0")
    adapters = []
    for i in range(N_ADAPTERS):
        path = cache / f"lora-{shape_name}-r{RANK}-{i}.gguf"
        if not path.exists():
            build_lora_gguf(path, shape, rank=RANK, seed=i)
        adapters.append(path)
    return model, shape, adapters


def run(runner: LlamaRunner, prompts: list[list[int]], adapters: list[str]) -> tuple[float, int, int]:
    """(seconds, generated tokens, steps) for every prompt under its adapter."""
    core = EngineCore(runner, EngineConfig(max_running=PARALLEL, step_tokens=512, prefix_cache=False))
    for i, prompt in enumerate(prompts):
        request = GenerateRequest(f"r{i}", prompt, GREEDY, max_tokens=OUT, ignore_eos=True,
                                  adapter=adapters[i % len(adapters)])
        core.add(core.prepare(request, lambda _: None))
    start = time.perf_counter()
    while core.has_work:
        core.step()
    stats = core.stats()
    return time.perf_counter() - start, stats.generated_tokens, stats.steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=("small", "bench"), default="small")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, shape, paths = files(args.shape)
    runner = LlamaRunner(model, n_ctx=4096, n_seq_max=64, n_batch=512, n_threads=2)
    names = [f"a{i}" for i in range(N_ADAPTERS)]
    for name, path in zip(names, paths, strict=True):
        info = runner.adapters.load(name, path)
    rng = random.Random(0)
    prompts = [[rng.randrange(300, shape.n_vocab) for _ in range(PROMPT)] for _ in range(args.requests)]
    cases = {"base": [""], "one adapter": names[:1], f"{N_ADAPTERS} adapters": names}
    results: dict[str, list[tuple[float, int, int]]] = {case: [] for case in cases}
    run(runner, prompts[:PARALLEL], [""])  # warm up
    for repeat in range(args.repeats):
        order = list(cases)[repeat % len(cases):] + list(cases)[: repeat % len(cases)]
        for case in order:
            results[case].append(run(runner, prompts, cases[case]))
    runner.close()
    print(f"model {model.name}, {args.requests} requests x {OUT} tokens, {PARALLEL} parallel, adapters rank {RANK} "
          f"({info.nbytes / 2**20:.2f} MiB each), medians of {args.repeats}")
    print("| case | output tok/s | steps | vs base |")
    print("|---|---|---|---|")
    base = statistics.median(n / s for s, n, _ in results["base"])
    for case, runs in results.items():
        rate = statistics.median(n / s for s, n, _ in runs)
        print(f"| {case} | {rate:.1f} | {runs[0][2]} | {rate / base:.2f}x |")


if __name__ == "__main__":
    main()
