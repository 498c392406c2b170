"""pier's copy on a GPU against llama-server built with the same GPU backend from the same llama.cpp sources.

    export LLAMA_CPP_LIB_PATH=/tmp/llama.cpp/build/bin     # pier's llama_cpp loads that GPU build
    python benchmarks/gpu_vs_llama_server.py --peers-dir /tmp/llama.cpp/build/bin --out gpu.md
    python benchmarks/gpu_vs_llama_server.py --only greedy ...                      # some comparisons only

On a GPU host, benchmarks/gpu_device.sh builds llama.cpp with CUDA and runs this. Both servers hold every layer
and the KV cache on one GPU (pier: PIER_GPUS=1, as the gateway starts a copy holding one; llama-server:
--n-gpu-layers all), 64 parallel sequences in one unified KV cache, flash attention as llama.cpp chooses, and the
same client (pier bench's run_bench: OpenAI completions, streaming, token-id prompts, ignore_eos, temperature 0).

Comparisons (`--only` names):
  levels   random 128-token prompts, 64 output tokens, c = 1, 8, 32, 64; both caches off
  prefix   512 shared tokens + 64 of each request's own, 64 output tokens, c = 32; both caches on
  greedy   32 prompts, each alone on llama-server (one sequence: llama.cpp's reference answer), then all 32 at
           once on each server: how many answers are the reference's, token for token
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
from common import add_peers_dir, cached_model, log, parse_comparisons, peer, raise_on_sigterm
from measure import Arm, Measurer, Shape
from peers import Catalog, Fleet, completions, running
from report import TOKS, TTFT, Check, Section, machine, model_shape, ratio, render_section

from pier.bench.vocabulary import ids_from_gguf

SECTIONS = ("levels", "prefix", "greedy")
PARALLEL = 64
CONTEXT = 32768  # 64 x (128 + 64) = 12288 cells at the peak
# llama-server keeps the shared prefix in every slot: 64 x (512 + 64 + 64) = 40960 cells
PREFIX_CONTEXT = 65536
GREEDY_PROMPTS = 32
GREEDY_TOKENS = 48


def levels(catalog: Catalog, fleet: Fleet, measurer: Measurer, concurrency: list[int], split: bool) -> Section:
    pier_ = catalog.pier("pier", cache=False, ctx=CONTEXT, parallel=PARALLEL)
    llama = catalog.llama("llama-server", cache=False, ctx=CONTEXT, parallel=PARALLEL)
    per_slot = catalog.llama("llama-server, a KV cache per slot", cache=False, ctx=CONTEXT, parallel=PARALLEL,
                             unified=False)
    shape = Shape(input_len=128, output_len=64)
    servers = (pier_, llama, per_slot) if split else (pier_, llama)
    with running(fleet, servers):
        arms = [Arm(s.label, completions(s)) for s in servers]
        runs = measurer.interleaved(arms, shape, concurrency)
    section = Section("Random prompts, one GPU: pier vs llama-server, no prompt caching",
                      f"Every server: {PARALLEL} parallel sequences, {CONTEXT} KV cells, caches off; llama-server "
                      "with one unified KV cache, as pier"
                      + (" and with its default, a cache per slot." if split else "."),
                      [s.shown() for s in servers], arms, concurrency, shape, runs,
                      [(pier_.label, s.label) for s in servers[1:]])
    for c in concurrency:
        toks = ratio(runs, pier_.label, llama.label, c, TOKS)
        section.checks.append(Check(f"c={c}: output tok/s ≥ 1.0x llama-server", f"{toks:.2f}x", toks >= 1.0))
    return section


def prefix(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    pier_ = catalog.pier("pier (cache on)", cache=True, ctx=PREFIX_CONTEXT, parallel=PARALLEL)
    llama = catalog.llama("llama-server (cache on)", cache=True, ctx=PREFIX_CONTEXT, parallel=PARALLEL)
    shape, c = Shape(input_len=64, output_len=64, shared_prefix=512), 32
    with running(fleet, [pier_, llama]):
        arms = [Arm(s.label, completions(s)) for s in (pier_, llama)]
        runs = measurer.interleaved(arms, shape, [c])
    toks = ratio(runs, pier_.label, llama.label, c, TOKS)
    ttft = ratio(runs, pier_.label, llama.label, c, TTFT)
    return Section("Shared prefix, one GPU: pier's prefix cache vs llama-server's prompt cache",
                   "Every request of a run starts with the same 512 tokens (a new prefix per run), then its own 64.",
                   [s.shown() for s in (pier_, llama)], arms, [c], shape, runs, [(pier_.label, llama.label)],
                   [Check(f"c={c}: output tok/s ≥ 2x llama-server", f"{toks:.2f}x", toks >= 2.0),
                    Check(f"c={c}: TTFT p50 ≤ 0.5x llama-server's", f"{ttft:.2f}x", ttft <= 0.5)])


async def _answers(url: str, prompts: Sequence[Sequence[int]], concurrency: int) -> list[str]:
    """Each prompt's greedy answer, `concurrency` requests at a time."""
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=300) as http:
        async def one(prompt: Sequence[int]) -> str:
            async with gate:
                response = await http.post(url, json={
                    "prompt": list(prompt), "max_tokens": GREEDY_TOKENS, "temperature": 0, "ignore_eos": True})
                response.raise_for_status()
                return str(response.json()["choices"][0]["text"])
        return list(await asyncio.gather(*(one(p) for p in prompts)))


def greedy(catalog: Catalog, fleet: Fleet) -> list[str]:
    pier_ = catalog.pier("pier", cache=False, ctx=CONTEXT, parallel=PARALLEL)
    llama = catalog.llama("llama-server", cache=False, ctx=CONTEXT, parallel=PARALLEL)
    rng = random.Random(7)
    pool = ids_from_gguf(catalog.model)
    prompts = [tuple(pool.sample(rng, rng.randint(16, 128))) for _ in range(GREEDY_PROMPTS)]
    with running(fleet, [pier_, llama]):
        reference = asyncio.run(_answers(completions(llama), prompts, 1))
        alone = asyncio.run(_answers(completions(pier_), prompts, 1))
        loaded = {s.label: asyncio.run(_answers(completions(s), prompts, GREEDY_PROMPTS)) for s in (pier_, llama)}

    def same(answers: list[str]) -> int:
        return sum(a == r for a, r in zip(answers, reference, strict=True))

    met = same(loaded[pier_.label]) >= same(loaded[llama.label])
    return [
        f"## Greedy answers under load: {GREEDY_PROMPTS} prompts of 16-128 tokens, {GREEDY_TOKENS} tokens each", "",
        "The reference: each prompt alone on llama-server (one sequence at a time). Then all at once on each server.",
        "", "```", pier_.shown(), llama.shown(), "```", "",
        "| server | load | answers equal to the reference |", "|---|---|---|",
        f"| pier | one at a time | {same(alone)} of {GREEDY_PROMPTS} |",
        *(f"| {label} | {GREEDY_PROMPTS} at once | {same(answers)} of {GREEDY_PROMPTS} |"
          for label, answers in loaded.items()), "",
        f"- target, pier as often as llama-server under load: {'met' if met else '**missed**'}",
        "- llama.cpp's numerics depend on how tokens are batched, so a near tie of the random-weights model can go "
        "either way under load.", "",
    ]


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "no NVIDIA GPU seen by nvidia-smi"


def bench_model_7b() -> Path:
    """The 7B-class Q4_0 model (Mistral 7B's shape)."""
    from pier.synthetic.builder import BENCH_7B

    return cached_model("bench-7b-q4_0.gguf", BENCH_7B, "Q4_0")


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model_7b()
    catalog = Catalog(model, peer("llama-server", args.peers_dir), threads=args.threads, gpu=not args.cpu)
    measurer = Measurer(model, args.requests, args.repeats)
    lines = ["# pier vs llama-server on one GPU", "", f"- model: {model_shape(model)}", f"- GPU: {gpu_name()}",
             f"- machine: {machine()}", f"- command: `{shlex.join(['python', *sys.argv])}`", ""]
    with tempfile.TemporaryDirectory(prefix="pier-gpu-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(logs)
        steps: dict[str, Callable[[], list[str]]] = {
            "levels": lambda: timed(lambda: levels(catalog, fleet, measurer, args.levels, args.split)),
            "prefix": lambda: timed(lambda: prefix(catalog, fleet, measurer)),
            "greedy": lambda: greedy(catalog, fleet),
        }
        try:
            for name in args.only:
                log(f"--- {name}")
                lines += steps[name]()
                _write(args.out, lines + measurer.problems)  # what is measured survives an interrupted run
        except KeyboardInterrupt:
            log("interrupted: stopping the servers")
        finally:
            fleet.stop_all()
    lines += ["## Failed requests", "", *measurer.problems, ""] if measurer.problems else []
    lines.append(f"Took {(time.monotonic() - started) / 60:.1f} min.")
    _write(args.out, lines)
    print("\n".join(lines))


def timed(measure: Callable[[], Section]) -> list[str]:
    begun = time.monotonic()
    section = measure()
    section.seconds = time.monotonic() - begun
    return render_section(section)


def _write(out: str | None, lines: list[str]) -> None:
    if out:
        Path(out).write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to serve (default: a 7B-class Q4_0 model with random weights)")
    parser.add_argument("--requests", type=int, default=32, help="requests per run (at least 2 per user)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="CPU threads for both servers")
    parser.add_argument("--split", action=argparse.BooleanOptionalAction, default=True,
                        help="also measure llama-server with its default KV cache per slot in the levels comparison")
    parser.add_argument("--cpu", action="store_true", help="both servers on the CPU instead (a dry run of the script)")
    parser.add_argument("--levels", default="1,8,32,64", help="concurrency levels of the levels comparison")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated, from {', '.join(SECTIONS)}")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    add_peers_dir(parser)
    args = parse_comparisons(parser, SECTIONS)
    raise_on_sigterm()
    run(args)


if __name__ == "__main__":
    main()
