"""Issue 26's table at any thread count: pier against llama-server on six workloads, the same threads for both.

    python benchmarks/many_cores.py --peers-dir DIR --threads 16 --repeats 2 --out table.md
    python benchmarks/many_cores.py --llama-server PATH --threads 2 --only c8,mt16 --also PIER_BATCH_TOKENS=128

Rows (`--only` names), each with both servers up at once (idle while the other is measured), interleaved A/B per
repeat (pier first in even repeats), stopped before the next row:
  c8      c = 8 closed loop, 64-token random token-id prompts, 64 output tokens; 8 parallel, 4096 cells, caches off
  prefix  c = 8, 512 shared + 32 own tokens (a new prefix per run), 64 out; 8 parallel, 8192 cells, caches on
  mt16    multi-turn: 16 conversations x 4 turns on 8 users, each turn resending the chat so far (64-token user
          messages, 32-token replies, OpenAI chat API); 8 parallel, 4096 cells, caches on
  c32     c = 32, the c8 prompts; 32 parallel, 8192 cells, caches off
  mt64    multi-turn: 64 conversations x 4 turns on 32 users; 32 parallel, 16384 cells, caches on
  mtsys   mt16's chats, each starting with one 1,000-token system prompt; 8 parallel, 16384 cells (llama-server's
          slots each hold a copy of it), caches on
Every request: streaming, temperature 0, ignore_eos, fixed lengths; the same prompts for both servers of a repeat.
pier runs `python -m pier.server.container --threads T --parallel P` (MAX_BATCH_TOTAL_TOKENS = cells), llama-server
`-t T -tb T -c cells -np P --kv-unified` (prompt caches off with --no-cache-prompt --cache-ram 0 where pier's is).

The kernel bound of the single-turn rows is llama.cpp's own `llama-batched-bench` at the same batch
(benchmarks/engine_vs_batched_bench.py --pp 64 --tg 64 --batches 8,32): both servers run those kernels, so a
server's decode rate (parallel sequences / ITL p50) can at best reach its S_TG.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from common import add_peers_dir, bench_model, log, omp_policy, peer, raise_on_sigterm
from engine_steps import EngineSteps, scrape
from measure import Arm, Measurer, Shape
from multi_turn import LLAMA, choose_words, one_run
from peers import Catalog, Fleet, Server, completions, running
from report import machine, model_shape, num

from pier.bench.compare import paired_ratios, ratio_of_medians, spread
from pier.bench.metrics import MS, Metrics

TIMEOUT_S = "600"  # pier's deadline per request: a busy 2-core host takes minutes for the widest rows


@dataclass(frozen=True)
class Row:
    name: str
    title: str
    parallel: int
    cells: int
    cache: bool
    shape: Shape | None = None  # single-turn rows
    concurrency: int = 0
    conversations: int = 0  # multi-turn rows
    users: int = 0
    system: int = 0  # tokens of a system prompt every conversation starts with
    # the targets: output tok/s at least, TTFT p50 at most, ITL p50 at most (pier / llama-server)
    toks: float = 1.0
    ttft: float = 0.8
    itl: float | None = None


ROWS = (
    Row("c8", "c = 8, 64-token prompts, 64 out", 8, 4096, False, Shape(64, 64), concurrency=8),
    Row("prefix", "c = 8, 512 shared + 32 own tokens, 64 out", 8, 8192, True, Shape(32, 64, shared_prefix=512),
        concurrency=8, toks=2.0, ttft=0.5),
    Row("mt16", "multi-turn: 16 conversations x 4 turns on 8 users", 8, 4096, True, conversations=16, users=8,
        toks=1.1, itl=1.1),
    Row("c32", "c = 32, 64-token prompts, 64 out", 32, 8192, False, Shape(64, 64), concurrency=32),
    Row("mt64", "multi-turn: 64 conversations x 4 turns on 32 users", 32, 16384, True, conversations=64, users=32,
        toks=1.1, itl=1.1),
    # chats behind one system prompt: llama-server's slots each hold a copy of it, so both get the cells it needs
    Row("mtsys", "multi-turn behind one 1,000-token system prompt: 16 conversations x 4 turns on 8 users", 8, 16384,
        True, conversations=16, users=8, system=1000, toks=1.1, itl=1.1),
)
ROW_NAMES = tuple(r.name for r in ROWS)

Results = dict[str, list[Metrics]]  # server label -> one Metrics per repeat


def servers(catalog: Catalog, row: Row, also: Sequence[tuple[str, str]], threads: Sequence[int]) -> list[Server]:
    """pier, pier with each of `also`'s settings, pier with each of `threads` threads, and llama-server."""
    deadline = (("SAGEMAKER_MODEL_SERVER_TIMEOUT", TIMEOUT_S),)
    piers = [catalog.pier("pier", cache=row.cache, ctx=row.cells, parallel=row.parallel, settings=deadline)]
    piers += [catalog.pier(f"pier {k}={v}", cache=row.cache, ctx=row.cells, parallel=row.parallel,
                           settings=(*deadline, (k, v))) for k, v in also]
    piers += [replace(catalog, threads=n).pier(f"pier, {n} threads", cache=row.cache, ctx=row.cells,
                                               parallel=row.parallel, settings=deadline) for n in threads]
    return [*piers, catalog.llama(LLAMA, cache=row.cache, ctx=row.cells, parallel=row.parallel)]


def single_turn(row: Row, fleet_servers: list[Server], measurer: Measurer) -> Results:
    assert row.shape is not None
    arms = [Arm(s.label, completions(s)) for s in fleet_servers]
    runs = measurer.interleaved(arms, row.shape, [row.concurrency])
    return {arm.label: runs[(arm.label, row.concurrency)] for arm in arms}


def multi_turn(row: Row, fleet_servers: list[Server], repeats: int, problems: list[str]) -> Results:
    tokens = asyncio.run(choose_words(fleet_servers[0]))  # one GGUF, one tokenizer: the same words for all
    for server in fleet_servers:
        asyncio.run(one_run(server, tokens, row.users, "warm-up", row.users, row.system))
    results: Results = {}
    for repeat in range(repeats):
        for server in fleet_servers if repeat % 2 == 0 else fleet_servers[::-1]:
            metrics, hits, errors = asyncio.run(one_run(server, tokens, row.conversations, f"{row.name}:{repeat}",
                                                        row.users, row.system))
            results.setdefault(server.label, []).append(metrics)
            problems += [f"{server.label} {row.name} #{repeat + 1}: {e}" for e in errors]
            log(f"{row.name} #{repeat + 1} {server.label}: {metrics.output_throughput:.1f} tok/s, TTFT p50 "
                f"{metrics.ttft.median * MS:.0f} ms, ITL p50 {metrics.itl.median * MS:.1f} ms, hits {hits:.0%}, "
                f"{metrics.completed}/{metrics.started} ok")
    return results


# ---- report ----------------------------------------------------------------------------------------------------

COLUMNS = (("output tok/s", lambda m: m.output_throughput, 1.0), ("req/s", lambda m: m.request_throughput, 1.0),
           ("TTFT p50 ms", lambda m: m.ttft.median, MS), ("TTFT p99 ms", lambda m: m.ttft.percentiles[99], MS),
           ("ITL p50 ms", lambda m: m.itl.median, MS), ("ITL p99 ms", lambda m: m.itl.percentiles[99], MS))


def cell(samples: Sequence[float]) -> str:
    s = spread(list(samples))
    return num(s.median) if s.low == s.high else f"{num(s.median)} ({num(s.low)}–{num(s.high)})"


def ratio(a: list[float], b: list[float]) -> str:
    whole = ratio_of_medians(a, b)
    pairs = paired_ratios(a, b)
    shown = "n/a" if whole is None else f"{whole:.2f}x"
    return shown + (f" ({', '.join(f'{p:.2f}' for p in pairs)})" if len(pairs) > 1 else "")


def verdict(value: float | None, bound: float, at_least: bool) -> str:
    if value is None:
        return "n/a"
    return "met" if (value >= bound if at_least else value <= bound) else "**missed**"


def row_lines(row: Row, results: Results) -> list[str]:
    lines = [f"### {row.name}: {row.title} ({row.parallel} parallel, {row.cells} cells, caches "
             f"{'on' if row.cache else 'off'})", "", "| server | " + " | ".join(c for c, _, _ in COLUMNS) + " |",
             "|---" * (len(COLUMNS) + 1) + "|"]
    for label, ms in results.items():
        lines.append(f"| {label} | " + " | ".join(cell([f(m) * k for m in ms]) for _, f, k in COLUMNS) + " |")
    base = results.get(LLAMA)
    if base is None:
        return [*lines, ""]
    lines += ["", f"| {row.name} | output tok/s (≥ {row.toks}x) | TTFT p50 (≤ {row.ttft}x) | ITL p50"
              + (f" (≤ {row.itl}x)" if row.itl else "") + " | targets |", "|---|---|---|---|---|"]
    for label, ms in results.items():
        if label == LLAMA:
            continue
        toks = ratio_of_medians([m.output_throughput for m in ms], [m.output_throughput for m in base])
        ttft = ratio_of_medians([m.ttft.median for m in ms], [m.ttft.median for m in base])
        itl = ratio_of_medians([m.itl.median for m in ms], [m.itl.median for m in base])
        met = [verdict(toks, row.toks, True), verdict(ttft, row.ttft, False)]
        if row.itl:
            met.append(verdict(itl, row.itl, False))
        lines.append(f"| {label} / {LLAMA} | "
                     + " | ".join(ratio([f(m) for m in ms], [f(m) for m in base]) for f in
                                  (lambda m: m.output_throughput, lambda m: m.ttft.median, lambda m: m.itl.median))
                     + f" | {', '.join(met)} |")
    return [*lines, ""]


def engine_lines(engines: dict[str, EngineSteps]) -> list[str]:
    """pier's own step times over the row (its /metrics, warm-up included): what its ITL is made of."""
    measured = {label: e for label, e in engines.items() if e.step["decode"].steps or e.step["mixed"].steps}
    if not measured:
        return []
    lines = ["pier's engine steps over the row (`pier_engine_step_seconds`, warm-up included), p50 / p99 ms (steps):",
             "", "| server | decode steps | mixed steps | prompt-only steps |", "|---|---|---|---|"]
    for label, e in measured.items():
        lines.append(f"| {label} | {e.cell('decode')} | {e.cell('mixed')} | {e.cell('prompt')} |")
    return [*lines, ""]


def render(args: argparse.Namespace, model: Path, done: list[tuple[Row, Results, dict[str, EngineSteps]]],
           commands: list[str],
           problems: list[str], seconds: float) -> str:
    lines = ["# pier vs llama-server: the issue-26 table", "", f"- model: {model_shape(model)}",
             f"- machine: {machine()}", f"- threads: {args.threads} for every server; OMP_WAIT_POLICY: {omp_policy()}",
             f"- {args.repeats} repeats, interleaved; single-turn runs of max({args.requests}, 2·c) requests; cells "
             "are median (min–max) over repeats; ratios: of the medians (per repeat)",
             f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min", "", "```",
             *commands, "```", ""]
    for row, results, engines in done:
        lines += [*row_lines(row, results), *engine_lines(engines)]
    if problems:
        lines += ["## Failed requests", "", *[f"- {p}" for p in problems], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peers_dir(parser)
    parser.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"),
                        help="llama-server binary or a wrapper of it (default: llama-server in --peers-dir)")
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--requests", type=int, default=32, help="requests per single-turn run (at least 2·c)")
    parser.add_argument("--only", default=",".join(ROW_NAMES), help=f"comma-separated, from {', '.join(ROW_NAMES)}")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=VALUE",
                        help="also run a pier copy with this environment setting (repeatable)")
    parser.add_argument("--also-threads", action="append", type=int, default=[], metavar="N",
                        help="also run pier with N threads (repeatable): the cores left to its HTTP thread and the "
                             "client")
    parser.add_argument("--out", help="also write the markdown report to this file (rewritten after each row)")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    args = parser.parse_args()
    wanted = [name.strip() for name in args.only.split(",") if name.strip()]
    if unknown := sorted(set(wanted) - set(ROW_NAMES)):
        parser.error(f"--only: unknown {unknown}; choose from {', '.join(ROW_NAMES)}")
    also = [tuple(s.split("=", 1)) for s in args.also]
    if any(len(pair) != 2 or not all(pair) for pair in also):
        parser.error("--also takes NAME=VALUE, such as PIER_SEPARATE_DECODE_ROWS=false")
    binary = Path(args.llama_server) if args.llama_server else peer("llama-server", args.peers_dir)
    raise_on_sigterm()
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model()
    catalog = Catalog(model, binary, threads=args.threads)
    measurer = Measurer(model, args.requests, args.repeats)
    done: list[tuple[Row, Results, dict[str, EngineSteps]]] = []
    commands: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pier-many-cores-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(logs)
        try:
            for row in (next(r for r in ROWS if r.name == name) for name in wanted):
                log(f"--- {row.name}: {row.title}")
                up = servers(catalog, row, [(k, v) for k, v in also], args.also_threads)
                commands += [f"# {row.name}", *(s.shown() for s in up)]
                with running(fleet, up):
                    piers = [s for s in up if s.label != LLAMA]
                    before = {s.label: scrape(s.url) for s in piers}
                    results = (single_turn(row, up, measurer) if row.shape else
                               multi_turn(row, up, args.repeats, measurer.problems))
                    engines = {s.label: EngineSteps.between(before[s.label], scrape(s.url)) for s in piers}
                done.append((row, results, engines))
                text = render(args, model, done, commands, measurer.problems, time.monotonic() - started)
                if args.out:
                    Path(args.out).write_text(text + "\n")
        except KeyboardInterrupt:
            log("interrupted: stopping the servers")
        finally:
            fleet.stop_all()
    print(render(args, model, done, commands, measurer.problems, time.monotonic() - started))


if __name__ == "__main__":
    main()
