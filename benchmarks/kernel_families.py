"""Each CPU kernel family this host can run (AMX, repack, plain: pier.engine.kernels), pier's engine beside
llama.cpp's `llama-batched-bench` built from the same sources, on one model: prompt speed (one 512-token prompt)
and decode speed at 1 and 8 sequences.

    python benchmarks/kernel_families.py                       # the 360M-class Q4_0 model, 2 repeats
    python benchmarks/kernel_families.py --model M.gguf --repeats 3 --peers-dir ~/llama.cpp/build/bin

A family is a process-wide choice, so every measurement is a fresh process: pier's worker makes the choice a copy
would (`use_family`), and llama-batched-bench gets `--no-repack` for the plain family and, for the repack family on
an AMX host, the same seccomp refusal of AMX as a copy (pier.engine.amx_permission), installed before it is exec'd.
Runs are interleaved (llama.cpp, pier) per family and repeat, so the ratios compare neighbours in time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from common import add_peers_dir, bench_model, peer

from pier.bench.compare import spread
from pier.engine.kernels import HostKernels, KernelFamily, host_line, read_host

SPEEDS = ("prompt", "decode_c1", "decode_c8")


def llama_side(binary: Path, model: Path, family: KernelFamily, host: HostKernels, args: argparse.Namespace,
               ) -> dict[str, float]:
    command = [str(binary), "-m", str(model), "-c", str(max(args.ctx, 8 * (args.pp + args.tg) + 64)),
               "-b", "512", "-ub", "512", "-npp", str(args.pp), "-ntg", str(args.tg), "-npl", "1,8",
               "-t", str(args.threads), "-tb", str(args.threads), "-kvu", "--output-format", "jsonl"]
    if family is KernelFamily.PLAIN:
        command.append("--no-repack")
    if family is KernelFamily.REPACK and host.amx:  # the copy's way: AMX refused, then the binary
        command = [sys.executable, "-c", "import os, sys; from pier.engine.amx_permission import refuse_amx; "
                   "refuse_amx(); os.execv(sys.argv[1], sys.argv[1:])", *command]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    rows = {row["pl"]: row for row in (json.loads(line) for line in (out.stdout + out.stderr).splitlines()
                                       if line.startswith("{"))}
    return {"prompt": float(rows[1]["speed_pp"]), "decode_c1": float(rows[1]["speed_tg"]),
            "decode_c8": float(rows[8]["speed_tg"])}


def pier_side(model: Path, family: KernelFamily, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, __file__, "--worker", family.value, "--model", str(model), "--pp", str(args.pp),
               "--tg", str(args.tg), "--threads", str(args.threads), "--ctx", str(args.ctx)]
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def worker(args: argparse.Namespace) -> None:
    """pier's engine with one family, in a process of its own."""
    from pier.engine.engine import Engine
    from pier.engine.engine_config import EngineConfig
    from pier.engine.llama import LlamaRunner, system_info, use_family
    from pier.engine.request import GenerateRequest, SamplingParams

    use_family(KernelFamily(args.worker), read_host(system_info()))
    ctx = max(args.ctx, 8 * (args.pp + args.tg) + 64)
    runner = LlamaRunner(args.model, n_ctx=ctx, n_seq_max=16, n_batch=512, n_threads=args.threads)
    engine = Engine(runner, EngineConfig(max_running=8, step_tokens=512, prefix_cache=False)).start()
    rng = random.Random(7)

    def request(i: int, n_out: int) -> GenerateRequest:
        prompt = [runner.info.bos] + [rng.randrange(300, runner.info.n_vocab) for _ in range(args.pp - 1)]
        return GenerateRequest(f"r{i}", prompt, SamplingParams(temperature=0.0), max_tokens=n_out, ignore_eos=True)

    async def decode(batch: int, base: int) -> float:
        """llama-batched-bench's S_TG: tokens generated after every sequence has its first, over that time."""
        firsts: dict[int, float] = {}
        times: list[float] = []

        async def one(i: int) -> float:
            async for chunk in engine.generate(request(base + i, args.tg)):
                if chunk.token_ids:
                    now = time.perf_counter()
                    firsts.setdefault(i, now)
                    times.extend([now] * len(chunk.token_ids))
            return time.perf_counter()

        ends = await asyncio.gather(*(one(i) for i in range(batch)))
        start = max(firsts.values())
        return sum(t > start for t in times) / (max(ends) - start)

    async def main() -> dict[str, float]:
        async for _ in engine.generate(request(10_000, 2)):  # warm-up
            pass
        started = time.perf_counter()
        async for _ in engine.generate(request(10_001, 1)):
            pass
        prompt = args.pp / (time.perf_counter() - started)
        return {"prompt": prompt, "decode_c1": await decode(1, 0), "decode_c8": await decode(8, 100)}

    speeds = asyncio.run(main())
    engine.stop()
    runner.close()
    print(json.dumps(speeds))


def compare(args: argparse.Namespace) -> None:
    binary = peer("llama-batched-bench", args.peers_dir)
    model = Path(args.model) if args.model else bench_model()
    host = read_host(subprocess.run([sys.executable, "-c", "from pier.engine.llama import system_info; "
                                     "print(system_info())"], check=True, capture_output=True, text=True).stdout)
    families = host.families()
    results = {(f, side): {s: [] for s in SPEEDS} for f in families for side in ("llama", "pier")}
    for repeat in range(args.repeats):
        for family in families:
            for side, run in (("llama", lambda f=family: llama_side(binary, model, f, host, args)),
                              ("pier", lambda f=family: pier_side(model, f, args))):
                for speed, value in run().items():
                    results[(family, side)][speed].append(value)
            print(f"repeat {repeat + 1} {family.value}: done", file=sys.stderr)
    print(f"\n{host_line()}\nmodel {model.name}, prompt {args.pp} tokens, {args.tg} generated, threads "
          f"{args.threads}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, {args.repeats} repeats "
          "(median, min-max)\n")
    print("| family | prompt t/s: llama.cpp | pier | decode c1 t/s: llama.cpp | pier | decode c8 t/s: llama.cpp "
          "| pier |")
    print("|---|---|---|---|---|---|---|")
    for family in families:
        cells = []
        for speed in SPEEDS:
            for side in ("llama", "pier"):
                s = spread(results[(family, side)][speed])
                cells.append(f"{s.median:.1f} ({s.low:.1f}-{s.high:.1f})")
        print(f"| {host.name(family)} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to use (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--pp", type=int, default=512, help="prompt tokens")
    parser.add_argument("--tg", type=int, default=64, help="generated tokens per sequence")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    add_peers_dir(parser)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    worker(args) if args.worker else compare(args)


if __name__ == "__main__":
    main()
