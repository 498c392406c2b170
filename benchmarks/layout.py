"""pier's whole-host layout against one llama-server on the same cores (issue 26):

    python benchmarks/layout.py --peers-dir DIR --cores 16 --layouts 4x4,2x8 --parallel 8 --levels 16,32,64 \
        --requests 64 --ttft-p99 2.0 --workloads random,multi-turn --out report.md

pier: `python -m pier.gateway` with one endpoint holding one inference component of N copies (`copies: N`,
`cpus: T`: the local backend pins each copy to T cores of its own and gives it T threads), PIER_PARALLEL=P each,
prefix cache on; driven through the gateway's OpenAI routes (model = the component). llama-server: -t cores,
-np the highest level (one slot per client, as it would be sized for that load; `--llama-slots` to change), unified
KV cache of as many cells a slot as each pier copy has, prompt cache on. More slots than clients only cost it: with
a unified cache its attention spans every cell its prompt cache keeps (seen across two runs on lent 16-core hosts:
at c = 32, -np 64 served 4.2 random requests/s where -np 32 had served 5.5). Each server runs alone (the copies
take every core), each workload at each level closed-loop.
Per workload the report gives the best req/s among levels whose TTFT p99 met the target, per server, and the best
pier layout / llama-server ratio against the 1.3x target.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common import bench_model, log, peer, peers_dir, raise_on_sigterm
from measure import Arm
from peers import Catalog, Fleet, Server, running

from pier.bench import Api, BenchOptions, PromptFormat, WorkloadKind, run_bench
from pier.bench.metrics import MS, Metrics

TARGET_RATIO = 1.3
TURNS, USER_LEN, REPLY_LEN = 4, 64, 32
RANDOM_IN, RANDOM_OUT = 64, 64
CELLS_PER_SEQUENCE = 1024  # multi-turn: 4 x (64 + 32) = 384 tokens plus the chat template's, with headroom
LLAMA = "llama-server"


@dataclass(frozen=True)
class Layout:
    copies: int
    threads: int

    @property
    def label(self) -> str:
        return f"pier {self.copies}x{self.threads}"


Row = tuple[str, str, int]  # (workload, server label, concurrency)


def best_meeting(rows: Mapping[int, tuple[float, float]], ttft_p99_s: float) -> float | None:
    """The best req/s among levels (level -> (req/s, TTFT p99 s)) whose TTFT p99 met the target; None: none met."""
    met = [rps for rps, p99 in rows.values() if p99 <= ttft_p99_s]
    return max(met) if met else None


def parse_layouts(text: str) -> list[Layout]:
    layouts = []
    for word in text.split(","):
        copies, _, threads = word.strip().partition("x")
        if not (copies.isdigit() and threads.isdigit()):
            raise SystemExit(f"--layouts {word!r}: write COPIESxTHREADS, such as 4x4")
        layouts.append(Layout(int(copies), int(threads)))
    return layouts


def options(arm: Arm, workload: str, model: Path, c: int, requests: int, seed: int) -> BenchOptions:
    chat = workload == "multi-turn"
    return BenchOptions(
        target=arm.url + ("/v1/chat/completions" if chat else "/v1/completions"),
        api=Api.OPENAI_CHAT if chat else Api.OPENAI_COMPLETIONS,
        model=arm.model, concurrency=(c,), requests=requests, warmup=0, repeats=1, timeout_s=300.0, seed=seed,
        workload=WorkloadKind.MULTI_TURN if chat else WorkloadKind.RANDOM,
        input_len=USER_LEN if chat else RANDOM_IN, output_len=REPLY_LEN if chat else RANDOM_OUT,
        turns=TURNS if chat else 1, prompt_format=PromptFormat.TEXT if chat else PromptFormat.IDS,
        vocab=model, temperature=0.0, progress=False,
    )


def once(arm: Arm, workload: str, model: Path, c: int, requests: int, seed: int) -> Metrics:
    import io

    from rich.console import Console

    result = run_bench(options(arm, workload, model, c, requests, seed), Console(file=io.StringIO()))
    if result.interrupted or not result.runs:
        raise KeyboardInterrupt("benchmark interrupted")
    return result.runs[0].metrics


def deploy(gateway: Server, model: Path, layout: Layout, parallel: int) -> tuple[str, list[str]]:
    """The layout's endpoint (one inference component of N copies of T cores) on the gateway; returns the
    component's name (the OpenAI routes' `model`) and what each copy got (cores, threads)."""
    from pier.client.deploy_file import ComponentBlock, DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    name = f"layout-{layout.copies}x{layout.threads}"
    environment = {"PIER_PARALLEL": str(parallel), "MAX_BATCH_TOTAL_TOKENS": str(parallel * CELLS_PER_SEQUENCE),
                   "PIER_PREFIX_CACHE": "true"}
    block = ComponentBlock(name=f"{name}-copies", model=ModelBlock(data=str(model), environment=environment),
                           copies=layout.copies, cpus=layout.threads)
    client = PierClient(gateway.url)
    client.deploy(DeployFile(endpoint=name, components=[block]), Path.cwd())
    got = []
    for copy in client.copies(name):
        pid = int(copy["pid"])
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        cores = next((s.split(":", 1)[1].strip() for s in status if s.startswith("Cpus_allowed_list")), "?")
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        threads = argv[argv.index(b"--threads") + 1].decode() if b"--threads" in argv else "?"
        got.append(f"copy pid {pid}: cores {cores}, --threads {threads}")
    return block.name, got


def llama_server(given: str | None) -> Path:
    """The peers' folder's `run-llama-server` (a device bundle's wrapper that sets LD_LIBRARY_PATH) when it has
    one, else its `llama-server`."""
    wrapper = peers_dir(given) / "run-llama-server"
    return wrapper if wrapper.is_file() and os.access(wrapper, os.X_OK) else peer("llama-server", given)


def metric_cells(m: Metrics) -> list[str]:
    itl = m.itl.median * MS if m.itl.count else float("nan")
    return [f"{m.request_throughput:.2f}", f"{m.output_throughput:.0f}", f"{m.ttft.median * MS:.0f}",
            f"{m.ttft.percentiles[99] * MS:.0f}", f"{itl:.1f}", f"{m.failed}"]


def render(args: argparse.Namespace, results: dict[Row, Metrics], labels: Sequence[str], notes: Sequence[str],
           seconds: float, complete: bool) -> str:
    lines = ["# pier's whole-host layout vs one llama-server (issue 26)", "",
             f"- command: `{' '.join(['python', *sys.argv])}`; {seconds / 60:.1f} min"
             + ("" if complete else " (**interrupted**: partial results)"),
             f"- {os.cpu_count()} CPUs here, {args.cores} cores used; parallel {args.parallel} per copy; "
             f"llama-server -np {args.llama_slots or max(args.levels)} (slots), prompt cache on",
             f"- random: {RANDOM_IN}-token id prompts, {RANDOM_OUT} out, completions API; multi-turn: {TURNS} turns, "
             f"{USER_LEN}-token user messages, {REPLY_LEN}-token replies, chat API; closed loop, "
             f"max({args.requests}, 2c) requests per run", *[f"- {n}" for n in notes], ""]
    for workload in args.workloads:
        rows = [(k, m) for k, m in results.items() if k[0] == workload]
        if not rows:
            continue
        lines += [f"## {workload}", "", "| c | server | req/s | output tok/s | TTFT p50 ms | TTFT p99 ms | ITL p50 ms "
                  "| failed |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {c} | {label} | " + " | ".join(metric_cells(m)) + " |"
                  for (_, label, c), m in sorted(rows, key=lambda r: (r[0][2], labels.index(r[0][1])))]
        best = {label: best_meeting({c: (m.request_throughput, m.ttft.percentiles[99]) for (_, lb, c), m in rows
                                     if lb == label and m.failed == 0}, args.ttft_p99) for label in labels}
        lines += ["", f"req/s at TTFT p99 <= {args.ttft_p99} s (runs without failures): "
                  + ", ".join(f"{lb} {'none met' if v is None else f'{v:.2f}'}" for lb, v in best.items())]
        piers = [v for lb, v in best.items() if lb != LLAMA and v is not None]
        if piers and best.get(LLAMA):
            ratio = max(piers) / best[LLAMA]  # type: ignore[operator]
            lines.append(f"best pier layout / llama-server: {ratio:.2f}x — target ≥ {TARGET_RATIO}x: "
                         + ("met" if ratio >= TARGET_RATIO else "**missed**"))
        else:
            lines.append("ratio: n/a (a server met the TTFT target at no level)")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers-dir", help="folder holding llama-server (default: $PIER_PEERS_DIR)")
    parser.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"),
                        help="llama-server binary or a wrapper that runs it (default: --peers-dir's "
                             "run-llama-server, else its llama-server)")
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--layouts", default="4x4,2x8", help="COPIESxTHREADS,...")
    parser.add_argument("--parallel", type=int, default=8, help="parallel sequences per copy")
    parser.add_argument("--levels", default="16,32,64")
    parser.add_argument("--llama-slots", type=int, help="llama-server's -np (default: the highest level)")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--ttft-p99", type=float, default=2.0, help="seconds")
    parser.add_argument("--workloads", default="random,multi-turn")
    parser.add_argument("--out", help="markdown report, rewritten after every run")
    parser.add_argument("--logs", help="folder for the servers' logs (default: a temporary one)")
    args = parser.parse_args()
    args.levels = [int(v) for v in args.levels.split(",")]
    args.workloads = [w.strip() for w in args.workloads.split(",")]
    if unknown := [w for w in args.workloads if w not in ("random", "multi-turn")]:
        parser.error(f"--workloads: unknown {unknown}; choose from random, multi-turn")
    layouts = parse_layouts(args.layouts)
    if too_big := [lay.label for lay in layouts if lay.copies * lay.threads > args.cores]:
        parser.error(f"--layouts {too_big} need more than --cores {args.cores}")
    binary = Path(args.llama_server) if args.llama_server else llama_server(args.peers_dir)
    raise_on_sigterm()
    model = Path(args.model) if args.model else bench_model()
    slots = args.llama_slots or max(args.levels)
    catalog = Catalog(model, binary, threads=args.cores)
    labels = [LLAMA, *(lay.label for lay in layouts)]
    results: dict[Row, Metrics] = {}
    notes: list[str] = []
    started = time.monotonic()

    def write(complete: bool) -> None:
        text = render(args, results, labels, notes, time.monotonic() - started, complete)
        if args.out:
            Path(args.out).write_text(text + "\n")
        if complete:
            print(text)

    def measure(arm: Arm) -> None:
        for workload in args.workloads:
            once(arm, workload, model, min(4, max(args.levels)), 4, seed=10_000)  # warm-up
            for c in args.levels:
                for repeat in range(args.repeats):
                    m = once(arm, workload, model, c, max(args.requests, 2 * c), seed=repeat)
                    results[(workload, arm.label, c)] = m  # the last repeat's (repeats > 1: see the log)
                    log(f"{workload} c={c} #{repeat + 1} {arm.label}: {m.request_throughput:.2f} req/s, "
                        f"{m.output_throughput:.0f} tok/s, TTFT p50/p99 {m.ttft.median * MS:.0f}/"
                        f"{m.ttft.percentiles[99] * MS:.0f} ms, {m.completed}/{m.started} ok")
                    write(False)

    try:
        with tempfile.TemporaryDirectory(prefix="pier-layout-") as scratch:
            logs = Path(args.logs) if args.logs else Path(scratch)
            logs.mkdir(parents=True, exist_ok=True)
            llama = catalog.llama(LLAMA, cache=True, parallel=slots, ctx=slots * CELLS_PER_SEQUENCE)
            notes.append(f"{LLAMA}: `{llama.shown()}`")
            with running(Fleet(logs), [llama]):
                measure(Arm(LLAMA, llama.url))
            for layout in layouts:
                gateway = catalog.gateway(f"gateway {layout.label}", Path(scratch) / f"state-{layout.label[5:]}")
                fleet = Fleet(logs)
                with running(fleet, [gateway]):
                    name, got = deploy(gateway, model, layout, args.parallel)
                    notes.append(f"{layout.label}: component {name}; " + "; ".join(got))
                    log(notes[-1])
                    measure(Arm(layout.label, gateway.url, model=name))
        write(True)
    except KeyboardInterrupt:
        write(False)
        raise


if __name__ == "__main__":
    main()
