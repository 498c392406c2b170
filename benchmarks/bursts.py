"""Bursts: open-loop Poisson load at 50-90% of capacity, pier against llama-server (issue 16).

    python benchmarks/bursts.py --peers-dir FOLDER                # or PIER_PEERS_DIR=FOLDER; --llama-server PATH
    python benchmarks/bursts.py --repeats 3 --seconds 90 --out report.md
    python benchmarks/bursts.py --pier-src "pier before=OTHER/src" --without-llama-server   # against other sources

The request mix tests starvation: most requests are SHORT (--short-len prompt tokens), a share (--long-share) are
LONG (--long-len prompt tokens, several seconds of prefill on 2 cores), placed at random in the arrival order; every
request asks for 32-64 output tokens (ignore_eos, temperature 0). Prompts are token ids drawn from the model's
vocabulary, sent to the OpenAI completions API, streaming (pier bench's client), so both servers compute exactly
the same tokens and no prompt shares a prefix with another.

1. Capacity: each server alone, closed loop, --capacity-users users over --capacity-requests requests of the mix
   (one seeded list for both): completed requests / seconds.
2. Levels: Poisson arrivals at 50%, 70% and 90% (--levels) of the LOWER of the two capacities, for --seconds each.
   Both servers get the same absolute rates, the same arrival times and the same prompts (seeded per level and
   repeat), so they see the identical load. Servers alternate: pier first in even repeats, llama-server in odd ones.
   Each arrival is sent at its time whether or not earlier requests were answered (open loop); the report gives the
   client's worst lateness against the schedule, so an overloaded client cannot hide.

Reported per server and level: TTFT p50/p90/p99 over all requests and over SHORT requests alone (a short prompt
stuck behind a long one shows there first), TPOT and ITL p50/p99, achieved req/s, failures; and pier /
llama-server ratios of TTFT p99 per level (the issue's target: no worse than llama-server's, i.e. <= 1.0x).

Servers, started once: the same model, 2 threads, 8 parallel sequences, 8192 KV cells in one unified cache (two
long prompts and six short ones fit at once, so neither server runs out of cells):
  pier          python -m pier.server.container --threads 2 --parallel 8, MAX_BATCH_TOTAL_TOKENS=8192
  llama-server  -t 2 -tb 2 -c 8192 -np 8 --kv-unified (n_batch 2048, n_ubatch 512: its defaults)

The policies compared. pier (engine/scheduler.py `plan`, core.py `_admit`/`_schedule`): sequences are admitted
first come, first served while fewer than --parallel run and their prompt fits in the KV cells; each step every
running sequence that is generating decodes one token first; of the rest of the step's token budget (step_tokens
512) the oldest pending prompt takes up to half, then the shortest pending prompts the rest. A 1,500-token prompt
thus takes three or more steps, streams already generating get a token in each of them, and a short prompt that
arrives behind it is computed in its first step beside the long one's chunk.
llama-server (server-context.cpp `update_slots`): each iteration first adds one sampled token for every generating
slot, then fills the batch up to n_batch (2048) with pending prompt tokens slot by slot, in slot order (a task goes
to the free slot with the most similar cached prompt, else the least recently used), and hands the batch to one
llama_decode, which runs it in n_ubatch (512) pieces. A whole 1,500-token prompt therefore enters one iteration:
every generating stream waits for all of it before its next token; a short prompt that arrives meanwhile waits
for that iteration, then is computed in the next one together with every other pending prompt up to 2048 tokens (a
second long prompt included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import httpx
from common import add_peers_dir, bench_model, log, omp_policy, peer, raise_on_sigterm
from engine_steps import EngineSteps, scrape
from peers import THREADS, Catalog, Fleet, Server, running
from report import machine, model_shape, num, ranged

from pier.bench.compare import paired_ratios, ratio_of_medians
from pier.bench.conversations import Prompt
from pier.bench.metrics import MS, Metrics, summarize
from pier.bench.options import Api
from pier.bench.request_record import RequestRecord
from pier.bench.streaming_client import ClientSettings, OpenAICompletionsClient
from pier.bench.subject import resolve
from pier.bench.vocabulary import TokenPool, ids_from_gguf

CONTEXT = 8192
TIMEOUT_S = 300.0
LEVELS = (0.5, 0.7, 0.9)
PIER, LLAMA = "pier", "llama-server"


class Kind(StrEnum):
    SHORT = "short"
    LONG = "long"


@dataclass(frozen=True)
class Mix:
    """The request mix: prompt lengths, the share of long prompts, and the output length range (inclusive)."""

    short_len: int = 100
    long_len: int = 1500
    long_share: float = 0.1
    output_min: int = 32
    output_max: int = 64


@dataclass(frozen=True)
class Planned:
    """One request of a run: when it is sent (seconds after the run starts), its kind and lengths."""

    at: float
    kind: Kind
    input_len: int
    output_len: int


# ---- pure: rates, arrivals, the mix, the split -------------------------------------------------------------------


def level_rates(capacities: Mapping[str, float], fractions: Sequence[float]) -> list[float]:
    """The absolute arrival rates (req/s) every server gets: each fraction of the lowest capacity, so the same load
    is at most the fraction of what the slower server sustains."""
    if not capacities:
        raise ValueError("no capacity was measured")
    lowest = min(capacities.values())
    if lowest <= 0:
        raise ValueError(f"a server completed no request in the capacity run ({dict(capacities)}); see its log")
    if any(f <= 0 for f in fractions):
        raise ValueError(f"load fractions must be positive, got {list(fractions)}")
    return [lowest * f for f in fractions]


def arrival_times(rate: float, seconds: float, seed: str) -> list[float]:
    """Poisson arrivals at `rate` per second over [0, seconds): exponential gaps, the first at 0 (as vLLM's
    benchmark). The same seed gives the same times."""
    if rate <= 0 or seconds <= 0:
        raise ValueError(f"rate and seconds must be positive, got {rate} and {seconds}")
    rng = random.Random(f"arrivals:{seed}")
    times, now = [], 0.0
    while now < seconds:
        times.append(now)
        now += rng.expovariate(rate)
    return times


def request_mix(count: int, mix: Mix, seed: str) -> list[tuple[Kind, int, int]]:
    """`count` requests as (kind, prompt tokens, output tokens): exactly round(count * long_share) long ones at
    seeded random places, so even a short run holds its share of long prompts; outputs uniform in the range."""
    rng = random.Random(f"mix:{seed}")
    longs = set(rng.sample(range(count), round(count * mix.long_share)))
    return [(Kind.LONG, mix.long_len, rng.randint(mix.output_min, mix.output_max)) if i in longs
            else (Kind.SHORT, mix.short_len, rng.randint(mix.output_min, mix.output_max)) for i in range(count)]


def schedule(rate: float, seconds: float, mix: Mix, seed: str) -> list[Planned]:
    """One level's requests: Poisson arrival times with the mix laid over them."""
    times = arrival_times(rate, seconds, seed)
    return [Planned(at, *spec) for at, spec in zip(times, request_mix(len(times), mix, seed), strict=True)]


def by_kind(records: Sequence[RequestRecord], plan: Sequence[Planned], duration_s: float) -> dict[str, Metrics]:
    """Metrics over all requests and over each kind alone (records[i] is plan[i]'s answer), all over the run's
    duration, so a kind's req/s is its part of the whole."""
    if len(records) != len(plan):
        raise ValueError(f"{len(records)} records for {len(plan)} planned requests")
    split = {"all": summarize(records, duration_s)}
    for kind in Kind:
        split[kind.value] = summarize([r for r, p in zip(records, plan, strict=True) if p.kind is kind], duration_s)
    return split


# ---- running the load --------------------------------------------------------------------------------------------


@dataclass
class Run:
    server: str
    level: float  # fraction of capacity
    rate: float
    repeat: int
    split: dict[str, Metrics]
    late_s: float  # the client's worst lateness against the arrival schedule
    engine: EngineSteps | None = None  # a pier copy's own step times over the run (its /metrics)


def prompts(plan: Sequence[Planned], pool: TokenPool, seed: str) -> list[Prompt]:
    rng = random.Random(f"prompts:{seed}")
    return [Prompt(None, (), pool.sample(rng, p.input_len), p.output_len, p.input_len) for p in plan]


def client_for(http: httpx.AsyncClient, server: Server) -> OpenAICompletionsClient:
    target = resolve(server.url, Api.OPENAI_COMPLETIONS, label=server.label)
    return OpenAICompletionsClient(http, target, ClientSettings(None, 0.0, TIMEOUT_S))


async def open_loop(server: Server, plan: Sequence[Planned], sent: Sequence[Prompt]) -> tuple[list[RequestRecord],
                                                                                             float, float]:
    """Send each request at its planned time, answered or not; returns the records, the run's seconds (until the
    last answer) and the worst lateness of a send."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S), limits=httpx.Limits(max_connections=None)) as http:
        client = client_for(http, server)
        loop = asyncio.get_running_loop()
        start, late, tasks = loop.time(), 0.0, []
        for i, (p, prompt) in enumerate(zip(plan, sent, strict=True)):
            await asyncio.sleep(max(0.0, start + p.at - loop.time()))
            late = max(late, loop.time() - start - p.at)
            tasks.append(asyncio.create_task(client.send(prompt, RequestRecord(index=i, conversation=i, round=0))))
        records = list(await asyncio.gather(*tasks))
        return records, loop.time() - start, late


async def closed_loop(server: Server, sent: Sequence[Prompt], users: int) -> tuple[list[RequestRecord], float]:
    """`users` workers send the prompts in order, each its next one when its last is answered."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S), limits=httpx.Limits(max_connections=None)) as http:
        client = client_for(http, server)
        queue = list(enumerate(sent))[::-1]
        records: list[RequestRecord] = []

        async def user() -> None:
            while queue:
                i, prompt = queue.pop()
                records.append(await client.send(prompt, RequestRecord(index=i, conversation=i, round=0)))

        started = time.perf_counter()
        await asyncio.gather(*(user() for _ in range(users)))
        return records, time.perf_counter() - started


def capacity(server: Server, pool: TokenPool, mix: Mix, args: argparse.Namespace, problems: list[str]) -> float:
    """Sustained req/s of the mix under a closed-loop saturation run (the same seeded requests for every server)."""
    plan = [Planned(0.0, *spec) for spec in request_mix(args.capacity_requests, mix, "capacity")]
    records, seconds = asyncio.run(closed_loop(server, prompts(plan, pool, "capacity"), args.capacity_users))
    metrics = summarize(records, seconds)
    problems += errors(f"{server.label} capacity", records)
    log(f"capacity {server.label}: {metrics.request_throughput:.2f} req/s ({metrics.completed}/{metrics.started} ok "
        f"in {seconds:.0f} s, {args.capacity_users} users)")
    return metrics.request_throughput


def keep(path: Path, run: Run, plan: Sequence[Planned], records: Sequence[RequestRecord]) -> None:
    """Every request of a run as a JSON line: when it was due, its kind, and what the client saw."""
    with path.open("a") as out:
        for p, r in zip(plan, records, strict=True):
            out.write(json.dumps({"server": run.server, "level": run.level, "repeat": run.repeat, "at": p.at,
                                  "kind": p.kind.value, "input_len": p.input_len, "output_len": p.output_len,
                                  "ttft": r.ttft, "latency": r.latency, "error": r.error_code}) + "\n")


def errors(where: str, records: Sequence[RequestRecord]) -> list[str]:
    return [f"{where}: {e}" for e in sorted({f"{r.error_code}: {r.error_message[:120]}" for r in records if not r.ok})]


def measure(servers: list[Server], pool: TokenPool, mix: Mix, args: argparse.Namespace,
            problems: list[str]) -> tuple[dict[str, float], list[Run]]:
    warm = [Planned(0.0, *spec) for spec in request_mix(4, Mix(long_share=0.25), "warm-up")]
    for server in servers:
        asyncio.run(closed_loop(server, prompts(warm, pool, "warm-up"), 2))
    if args.capacity:  # given: the saturation runs are skipped (a quick look, or the last run's figure again)
        capacities = {"given": args.capacity}
    else:
        capacities = {s.label: capacity(s, pool, mix, args, problems) for s in servers}
    rates = level_rates(capacities, args.levels)
    runs = []
    for repeat in range(args.repeats):
        for fraction, rate in zip(args.levels, rates, strict=True):
            seed = f"{repeat}:{fraction}"
            plan = schedule(rate, args.seconds, mix, seed)
            sent = prompts(plan, pool, seed)
            for server in servers if repeat % 2 == 0 else servers[::-1]:
                before = scrape(server.url) if server.label != LLAMA else None
                records, seconds, late = asyncio.run(open_loop(server, plan, sent))
                engine = EngineSteps.between(before, scrape(server.url)) if before is not None else None
                run = Run(server.label, fraction, rate, repeat, by_kind(records, plan, seconds), late, engine)
                runs.append(run)
                if args.records:
                    keep(Path(args.records), run, plan, records)
                problems += errors(f"{server.label} {fraction:.0%} #{repeat + 1}", records)
                every, short = run.split["all"], run.split[Kind.SHORT]
                log(f"{fraction:.0%} ({rate:.2f} req/s) #{repeat + 1} {server.label}: TTFT p99 "
                    f"{every.ttft.percentiles[99] * MS:.0f} ms (short {short.ttft.percentiles[99] * MS:.0f} ms), "
                    f"{every.completed}/{every.started} ok, {seconds:.0f} s, sends up to {late * MS:.0f} ms late")
    return capacities, runs


# ---- report ------------------------------------------------------------------------------------------------------


def cell(values: Sequence[float], scale: float = MS) -> str:
    """Median over repeats, with the range when there are several."""
    return num(values[0] * scale) if len(values) == 1 else ranged(values, scale)


def of(runs: Sequence[Run], server: str, level: float) -> list[Run]:
    return sorted((r for r in runs if r.server == server and r.level == level), key=lambda r: r.repeat)


def results_table(runs: Sequence[Run], labels: Sequence[str], levels: Sequence[float]) -> list[str]:
    lines = ["| load | server | TTFT p50 / p90 / p99 ms, all | TTFT p50 / p90 / p99 ms, short | "
             "TTFT p50 / p99 ms, long | TPOT p50 / p99 ms | ITL p50 / p99 ms | req/s | failed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for level in levels:
        for label in labels:
            rs = of(runs, label, level)
            if not rs:
                continue

            def pcts(kind: str, attr: str, ps: tuple[int, ...], rs: list[Run] = rs) -> str:
                dists = [getattr(r.split[kind], attr) for r in rs if getattr(r.split[kind], attr).count]
                return " / ".join(cell([d.percentiles[p] for d in dists]) if dists else "–" for p in ps)

            failed = sum(r.split["all"].failed for r in rs)
            lines.append(f"| {level:.0%} ({rs[0].rate:.2f} req/s) | {label} | {pcts('all', 'ttft', (50, 90, 99))} | "
                         f"{pcts(Kind.SHORT, 'ttft', (50, 90, 99))} | {pcts(Kind.LONG, 'ttft', (50, 99))} | "
                         f"{pcts('all', 'tpot', (50, 99))} | {pcts('all', 'itl', (50, 99))} | "
                         f"{cell([r.split['all'].request_throughput for r in rs], 1.0)} | {failed} |")
    return lines


def engine_table(runs: Sequence[Run], labels: Sequence[str], levels: Sequence[float]) -> list[str]:
    """pier's steps on its engine thread beside the client's ITL (the first repeat): the policy bounds a mixed
    step (streams beside prompt tokens) by ITL_BOUND decode steps (streams alone) while slots are to spare."""
    lines = ["| load | server | decode steps p50 / p99 ms (steps) | mixed steps p50 / p99 ms (steps) | "
             "mixed p99 / decode p50 | prompt-only steps | client ITL p50 / p99 ms |", "|---|---|---|---|---|---|---|"]
    for level in levels:
        for label in labels:
            rs = [r for r in of(runs, label, level) if r.engine is not None and r.engine.step["decode"].steps]
            if not rs:
                continue
            run, engine = rs[0], rs[0].engine
            assert engine is not None
            decode, mixed = engine.step["decode"], engine.step["mixed"]
            bound = (f"{mixed.p99_s / decode.p50_s:.1f}x" if mixed.p99_s is not None and decode.p50_s else "–")
            itl = run.split["all"].itl
            lines.append(f"| {level:.0%} | {label} | {engine.cell('decode')} | {engine.cell('mixed')} | {bound} | "
                         f"{engine.step['prompt'].steps} | {num(itl.percentiles[50] * MS)} / "
                         f"{num(itl.percentiles[99] * MS)} |")
    return lines if len(lines) > 2 else []


def ratio_table(runs: Sequence[Run], levels: Sequence[float], other: str = LLAMA) -> list[str]:
    lines = [f"| load | TTFT p99 pier / {other}, all: of medians (per repeat) | short | target (<= 1.0x, all) |",
             "|---|---|---|---|"]
    for level in levels:
        a, b = of(runs, PIER, level), of(runs, other, level)
        if not a or not b:
            continue
        cells = []
        for kind in ("all", Kind.SHORT):
            x = [r.split[kind].ttft.percentiles[99] for r in a]
            y = [r.split[kind].ttft.percentiles[99] for r in b]
            of_medians = ratio_of_medians(x, y)
            whole = float("nan") if of_medians is None else of_medians
            cells.append((whole, f"{whole:.2f}x ({', '.join(f'{r:.2f}' for r in paired_ratios(x, y))})"))
        met = "met" if cells[0][0] <= 1.0 else "**missed**"
        lines.append(f"| {level:.0%} | {cells[0][1]} | {cells[1][1]} | {met} |")
    return lines


def capacity_line(args: argparse.Namespace, capacities: dict[str, float]) -> str:
    same = "both servers got the SAME absolute rates, arrival times and prompts (seeded per level and repeat)"
    if args.capacity:
        return f"- capacity given (--capacity): {args.capacity:.2f} req/s, not measured; {same}"
    lowest = min(capacities, key=lambda k: capacities[k])
    measured = ", ".join(f"{k} {v:.2f} req/s" for k, v in capacities.items())
    return (f"- capacity (closed loop, {args.capacity_users} users, {args.capacity_requests} requests, the drain at "
            f"the end included): {measured}; levels are fractions of the lower ({lowest}); {same}")


def report(args: argparse.Namespace, model: Path, mix: Mix, servers: list[Server], capacities: dict[str, float],
           runs: list[Run], problems: list[str], seconds: float) -> str:
    late = max((r.late_s for r in runs), default=0.0)
    lines = ["# Bursts: Poisson load at 50-90% of capacity, pier vs llama-server", "",
             f"- model: {model_shape(model)}", f"- machine: {machine()}",
             f"- OMP_WAIT_POLICY: {omp_policy()}",
             f"- mix: {1 - mix.long_share:.0%} short ({mix.short_len}-token prompts), {mix.long_share:.0%} long "
             f"({mix.long_len}-token prompts), {mix.output_min}-{mix.output_max} output tokens; token-id prompts, "
             "OpenAI completions, streaming, ignore_eos, temperature 0",
             capacity_line(args, capacities),
             f"- {args.seconds:g} s of arrivals per level, {args.repeats} repeat(s), servers interleaved; cells are "
             f"the median (min–max) over repeats; the client sent every request at most {late * MS:.0f} ms late",
             f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min", "", "```",
             *(s.shown() for s in servers), "```", "", *results_table(runs, [s.label for s in servers], args.levels),
             "", *ratio_table(runs, args.levels),
             *(line for label in other_sources(args) for line in ["", *ratio_table(runs, args.levels, label)]), ""]
    if engine := engine_table(runs, [s.label for s in servers], args.levels):
        lines += ["pier's engine steps over each level's run (its /metrics, `pier_engine_step_seconds`), first repeat:",
                  "", *engine, ""]
    if problems:
        lines += ["## Failed requests", "", *[f"- {p}" for p in problems], ""]
    return "\n".join(lines)


# ---- command -----------------------------------------------------------------------------------------------------


def fractions(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give fractions of capacity like 0.5,0.7,0.9") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: each fraction must be above 0, like 0.5,0.7,0.9")
    return values


def other_sources(args: argparse.Namespace) -> dict[str, Path]:
    """--pier-src's LABEL=SRC pairs."""
    pairs = [given.partition("=") for given in args.pier_src]
    return {label: Path(src).resolve() for label, _, src in pairs}


def servers_for(model: Path, binary: Path | None, others: Mapping[str, Path], threads: int = THREADS) -> list[Server]:
    """pier; pier from each of `others`' sources (label: another checkout's src folder, e.g. before a scheduler
    change); and llama-server unless `binary` is None; every one with `threads` threads."""
    catalog = Catalog(model, binary, threads=threads)
    # llama-server has no deadline; pier's default 60 s would cut requests short on a busy machine
    deadline = ("SAGEMAKER_MODEL_SERVER_TIMEOUT", str(TIMEOUT_S))
    pier = catalog.pier(PIER, cache=True, ctx=CONTEXT, settings=(deadline,))
    servers = [pier]
    for label, src in others.items():
        # ahead of what the environment has (on an offline host, the wheels and llama_cpp the bundle installed)
        path = os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH", "")) if p)
        servers.append(catalog.pier(label, cache=True, ctx=CONTEXT, settings=(deadline, ("PYTHONPATH", path))))
    if binary is not None:
        servers.append(catalog.llama(LLAMA, cache=True, ctx=CONTEXT))
    return servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peers_dir(parser)
    parser.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"),
                        help="llama-server binary (default: $LLAMA_SERVER, else llama-server in --peers-dir or "
                             "$PIER_PEERS_DIR)")
    parser.add_argument("--pier-src", action="append", default=[], metavar="LABEL=SRC",
                        help="also run pier from the sources SRC (another checkout's src folder) as LABEL: a change "
                             "against the code before it, in the same run (repeatable)")
    parser.add_argument("--without-llama-server", action="store_true", help="leave llama-server out")
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--threads", type=int, default=THREADS, help=f"threads of every server (default {THREADS})")
    parser.add_argument("--levels", type=fractions, default=LEVELS, help="fractions of capacity (default 0.5,0.7,0.9)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of arrivals per level (default 60)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--capacity", type=float,
                        help="req/s the levels are fractions of, instead of measuring each server's (a quick look)")
    parser.add_argument("--capacity-users", type=int, default=16)
    parser.add_argument("--capacity-requests", type=int, default=40)
    parser.add_argument("--short-len", type=int, default=Mix.short_len)
    parser.add_argument("--long-len", type=int, default=Mix.long_len)
    parser.add_argument("--long-share", type=float, default=Mix.long_share)
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--records", help="also append every request (due time, kind, TTFT, latency) to this JSON "
                                           "lines file")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    args = parser.parse_args()
    sizes = (args.short_len, args.long_len, args.repeats, args.seconds, args.capacity_users, args.capacity_requests)
    if not (0 <= args.long_share <= 1 and min(sizes) > 0):
        parser.error("--long-share must be in [0, 1]; --short-len, --long-len, --repeats, --seconds, --capacity-users "
                     "and --capacity-requests above 0")
    if any(not label or not src for label, _, src in (g.partition("=") for g in args.pier_src)):
        parser.error("--pier-src takes LABEL=SRC, e.g. 'pier before=../old/src'")
    if args.capacity is not None and args.capacity <= 0:
        parser.error("--capacity must be above 0 req/s (or leave it out to measure each server's)")
    binary = None
    if not args.without_llama_server:
        binary = Path(args.llama_server) if args.llama_server else peer("llama-server", args.peers_dir)
        if not binary.is_file():
            parser.error(f"{binary} (--llama-server) is not llama.cpp's llama-server binary")
    raise_on_sigterm()
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model()
    mix = Mix(args.short_len, args.long_len, args.long_share)
    pool = ids_from_gguf(model)
    servers = servers_for(model, binary, other_sources(args), args.threads)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pier-bursts-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        with running(Fleet(logs), servers):
            capacities, runs = measure(servers, pool, mix, args, problems)
    text = report(args, model, mix, servers, capacities, runs, problems, time.monotonic() - started)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
