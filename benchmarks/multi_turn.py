"""Multi-turn chat with more conversations than parallel sequences: pier against llama-server (issue 16).

    python benchmarks/multi_turn.py --peers-dir FOLDER                  # or PIER_PEERS_DIR=FOLDER; --llama-server PATH
    python benchmarks/multi_turn.py --repeats 5 --out report.md

Conversations of 4 turns: each turn sends the whole chat so far (OpenAI chat API, streaming, text of words that
are one token each, temperature 0, ignore_eos) with a new 64-token user message, and the 32-token reply goes
back into the next turn. 8 users send turns, closed loop. Two workloads:
  16 conversations  more conversations than parallel sequences. Turns wait in one queue, and a conversation's
                    next turn joins its back when the reply arrives, so it comes back after other conversations'
                    turns (users read and type between turns), as a copy serving many chats sees them.
  8 conversations   one per user: every turn follows the conversation's last reply at once.

Servers, started once with the same model, 2 threads, 4096 KV cells in one unified cache, 8 parallel sequences:
  pier          python -m pier.server.container --model M --threads 2 --parallel 8, MAX_BATCH_TOTAL_TOKENS=4096
                (prefix cache and host-memory tier at their defaults)
  llama-server  -m M -t 2 -tb 2 -c 4096 -np 8 --kv-unified (its prompt cache and --cache-ram at their defaults)

Interleaved: a warm-up conversation set per server, then for each repeat and workload both servers on the same
conversations (a fresh seed per repeat, so no run finds another's prompts cached), pier first in even repeats and
llama-server first in odd ones. Reported per run:
output tokens/s, TTFT p50/p99, and the prefix hit ratio (prompt tokens the server took from its cache, from
each answer's `timings.cache_n`, over prompt tokens from `usage`); for pier also its device / host-memory split
(from /metrics). Tables give medians over repeats (min-max) and the pier / llama-server ratios per repeat.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from common import add_peers_dir, bench_model, free_port, log, omp_policy, peer, raise_on_sigterm
from peers import HOST, Fleet, Server, running
from report import machine, model_shape, ranged

from pier.bench import BenchOptions, PromptFormat, WorkloadKind
from pier.bench.calibration import PromptTokens, choose_tokens
from pier.bench.compare import paired_ratios, ratio_of_medians
from pier.bench.conversations import Conversation, Conversations, Exchange
from pier.bench.metrics import MS, Metrics, Slo, summarize
from pier.bench.options import Api
from pier.bench.request_record import RequestRecord
from pier.bench.streaming_client import ClientSettings, OpenAIChatClient, Stream
from pier.bench.subject import resolve

THREADS, CONTEXT, PARALLEL, USERS, TURNS = 2, 4096, 8, 8, 4
INPUT_LEN, OUTPUT_LEN = 64, 32
WORKLOADS = (16, 8)  # conversations per run
TIMEOUT_S = 300.0
TARGET_TOKS, TARGET_TTFT = 1.2, 0.5  # issue 16: >= 1.2x llama-server's output tok/s, <= half its TTFT p50


class CacheReadingClient(OpenAIChatClient):
    """The chat client, also keeping each answer's `timings.cache_n` (pier and llama-server both send it on the
    last event): prompt tokens the server did not compute."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.cached: dict[int, int] = {}  # record index -> cache_n

    def read_event(self, data: str, stream: Stream) -> None:
        super().read_event(data, stream)
        if data.strip() == "[DONE]":
            return
        timings = json.loads(data).get("timings")
        if isinstance(timings, dict) and isinstance(timings.get("cache_n"), int):
            self.cached[stream.record.index] = timings["cache_n"]


@dataclass
class Run:
    server: str
    conversations: int
    repeat: int
    metrics: Metrics
    hit_ratio: float
    split: dict[str, float] = field(default_factory=dict)  # pier only: device / host hit ratios


def options(url: str, system: int = 0) -> BenchOptions:
    """The chats' shape; `system`: tokens of one system prompt every conversation starts with (0: none)."""
    return BenchOptions(target=url, api=Api.OPENAI_CHAT, workload=WorkloadKind.MULTI_TURN, turns=TURNS,
                        input_len=INPUT_LEN, output_len=OUTPUT_LEN, prompt_format=PromptFormat.TEXT,
                        temperature=0.0, timeout_s=TIMEOUT_S, progress=False, shared_prefix=system)


async def converse_in_turns(client: CacheReadingClient, conversations: list[Conversation],
                            users: int = USERS) -> list[RequestRecord]:
    """`users` workers take turns from one queue; a conversation's next turn joins the back when its reply arrives.
    A failed turn ends its conversation."""
    queue: asyncio.Queue[tuple[Conversation, int, tuple[Exchange, ...]] | None] = asyncio.Queue()
    for conversation in conversations:
        queue.put_nowait((conversation, 0, ()))
    records: list[RequestRecord] = []
    ongoing = len(conversations)

    async def user() -> None:
        nonlocal ongoing
        while (item := await queue.get()) is not None:
            conversation, turn, history = item
            record = RequestRecord(index=len(records), conversation=conversation.index, round=turn)
            records.append(record)
            prompt = conversation.prompt(turn, history)
            await client.send(prompt, record)
            if record.ok and turn + 1 < TURNS:
                queue.put_nowait((conversation, turn + 1, (*history, Exchange(prompt.user, record.text))))
                continue
            ongoing -= 1
            if not ongoing:  # the last conversation ended: release every user
                for _ in range(users):
                    queue.put_nowait(None)

    await asyncio.gather(*(user() for _ in range(users)))
    return records


async def one_run(server: Server, tokens: PromptTokens, n: int, seed: str,
                  users: int = USERS, system: int = 0) -> tuple[Metrics, float, list[str]]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S), limits=httpx.Limits(max_connections=None)) as http:
        target = resolve(server.url, Api.OPENAI_CHAT, label=server.label)
        client = CacheReadingClient(http, target, ClientSettings(None, 0.0, TIMEOUT_S))
        workload = Conversations(options(server.url, system), tokens.pool, seed)
        conversations = list(itertools.islice(workload.conversations(), n))
        started = time.perf_counter()
        records = await converse_in_turns(client, conversations, users)
        duration = time.perf_counter() - started
    metrics = summarize(records, duration, Slo.from_ms(None, None, None))
    ok = [r for r in records if r.ok]
    prompt = sum(r.input_tokens for r in ok)
    hits = sum(client.cached.get(r.index, 0) for r in ok) / prompt if prompt else 0.0
    errors = sorted({f"{r.error_code}: {r.error_message[:120]}" for r in records if not r.ok})
    return metrics, hits, errors


CACHE_COUNTERS = ("pier_prompt_tokens_total", "pier_prefix_cache_hit_tokens_total",
                  "pier_prefix_cache_restored_tokens_total")
ENGINE_COUNTERS = ("pier_engine_steps_total", "pier_generated_tokens_total", "pier_preemptions_total")


def pier_counters(server: Server, names: tuple[str, ...] = CACHE_COUNTERS) -> dict[str, float]:
    text = httpx.get(server.url + "/metrics", timeout=10).text
    found = {}
    for name in names:
        match = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
        found[name] = float(match.group(1)) if match else 0.0
    return found


def split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    prompt, hits, host = (after[k] - before[k] for k in before)
    return {"device": (hits - host) / prompt, "host": host / prompt} if prompt else {}


async def choose_words(server: Server) -> PromptTokens:
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT_S)) as http:
        target = resolve(server.url, Api.OPENAI_CHAT, label=server.label)
        client = OpenAIChatClient(http, target, ClientSettings(None, 0.0, TIMEOUT_S))
        return await choose_tokens(options(server.url), client, http, server.url, ids_allowed=False)


LLAMA, PIER = "llama-server", "pier"


def pier_server(label: str, model: Path, source: Path | None = None, omp: str | None = None,
                settings: Sequence[tuple[str, str]] = ()) -> Server:
    """pier's copy; `source`: the `src` folder of another checkout (a version to compare with) instead of this one;
    `settings`: more environment variables (PIER_BATCH_TOKENS=128, a setting to compare with the default)."""
    port = free_port()
    env = [*omp_env(omp), ("MAX_BATCH_TOTAL_TOKENS", str(CONTEXT)),
           ("SAGEMAKER_MODEL_SERVER_TIMEOUT", str(TIMEOUT_S)), *settings]  # llama-server has no deadline; pier's
    if source is not None:                                                  # 60 s would cut turns short when busy
        env.append(("PYTHONPATH", str(source.resolve())))
    return Server(label, (sys.executable, "-m", "pier.server.container", "--model", str(model), "--port", str(port),
                          "--host", HOST, "--threads", str(THREADS), "--parallel", str(PARALLEL)),
                  port, "/ping", tuple(env))


def llama_server(model: Path, binary: Path, omp: str | None = None) -> Server:
    port = free_port()
    return Server(LLAMA, (str(binary), "-m", str(model), "-t", str(THREADS), "-tb", str(THREADS), "-c", str(CONTEXT),
                          "-np", str(PARALLEL), "--kv-unified", "--host", HOST, "--port", str(port)), port, "/health",
                  tuple(omp_env(omp)))


def omp_env(omp: str | None) -> list[tuple[str, str | None]]:
    """OMP_WAIT_POLICY for a server: as given, or the benchmark's own (unset: OpenMP spins, then sleeps)."""
    return [("OMP_WAIT_POLICY", omp)] if omp else []


def measure(servers: list[Server], repeats: int, problems: list[str]) -> list[Run]:
    """Servers in the given order in even repeats, reversed in odd ones, so none always runs first."""
    tokens = asyncio.run(choose_words(servers[0]))  # the same words for all: the same GGUF, the same tokenizer
    for server in servers:
        asyncio.run(one_run(server, tokens, USERS, "warm-up"))
    runs = []
    for repeat in range(repeats):
        for n in WORKLOADS:
            for server in servers if repeat % 2 == 0 else servers[::-1]:
                piers = server.label != LLAMA
                before = pier_counters(server) if piers else {}
                engine = pier_counters(server, ENGINE_COUNTERS) if piers else {}
                metrics, hits, errors = asyncio.run(one_run(server, tokens, n, f"{repeat}:{n}"))
                if piers:  # why a step costs what it does: batch fill and KV pressure
                    steps, generated, preempted = (b - a for a, b in zip(
                        engine.values(), pier_counters(server, ENGINE_COUNTERS).values(), strict=True))
                    log(f"  pier engine: {steps:.0f} steps, {generated / max(steps, 1):.1f} tokens generated a "
                        f"step, {preempted:.0f} preemptions")
                run = Run(server.label, n, repeat, metrics, hits, split(before, pier_counters(server)) if piers else {})
                runs.append(run)
                problems += [f"{server.label} {n} conversations #{repeat + 1}: {e}" for e in errors]
                log(f"{n} conversations #{repeat + 1} {server.label}: {metrics.output_throughput:.1f} tok/s, TTFT p50 "
                    f"{metrics.ttft.median * MS:.0f} ms, hits {hits:.0%}, {metrics.completed}/{metrics.started} ok")
    return runs


# ---- report ----------------------------------------------------------------------------------------------------


def of(runs: list[Run], server: str, n: int) -> list[Run]:
    return sorted((r for r in runs if r.server == server and r.conversations == n), key=lambda r: r.repeat)


def tables(runs: list[Run], labels: list[str]) -> list[str]:
    lines = ["| conversations | server | output tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | prefix hit ratio | "
             "of which device / host |", "|---|---|---|---|---|---|---|---|"]
    for n in WORKLOADS:
        for label in labels:
            rs = of(runs, label, n)
            if not rs:
                continue
            where = "–" if label == LLAMA else (f"{ranged([r.split.get('device', 0) for r in rs], percent=True)} / "
                                                f"{ranged([r.split.get('host', 0) for r in rs], percent=True)}")
            lines.append(f"| {n} | {label} | {ranged([r.metrics.output_throughput for r in rs])} | "
                         f"{ranged([r.metrics.ttft.median for r in rs], MS)} | "
                         f"{ranged([r.metrics.ttft.percentiles[99] for r in rs], MS)} | "
                         f"{ranged([r.metrics.tpot.median for r in rs], MS)} | "
                         f"{ranged([r.hit_ratio for r in rs], percent=True)} | {where} |")
    lines += ["", "| conversations | ratio | output tok/s: of medians (per repeat) | "
              "TTFT p50: of medians (per repeat) | targets (≥ 1.2x, ≤ 0.5x) |", "|---|---|---|---|---|"]
    for n in WORKLOADS:
        for label in (x for x in labels if x != LLAMA):
            a, b = of(runs, label, n), of(runs, LLAMA, n)
            if not a or not b:
                continue
            toks = paired([r.metrics.output_throughput for r in a], [r.metrics.output_throughput for r in b])
            ttft = paired([r.metrics.ttft.median for r in a], [r.metrics.ttft.median for r in b])
            met = ", ".join("met" if ok else "**missed**" for ok in (toks[0] >= TARGET_TOKS, ttft[0] <= TARGET_TTFT))
            lines.append(f"| {n} | {label} / {LLAMA} | {toks[0]:.2f}x ({', '.join(f'{x:.2f}' for x in toks[1])}) | "
                         f"{ttft[0]:.2f}x ({', '.join(f'{x:.2f}' for x in ttft[1])}) | {met} |")
    return lines


def paired(a: list[float], b: list[float]) -> tuple[float, list[float]]:
    """The ratio of the medians, and a / b within each repeat (run minutes apart under the same noise)."""
    whole = ratio_of_medians(a, b)
    return float("nan") if whole is None else whole, paired_ratios(a, b)


def report(args: argparse.Namespace, model: Path, servers: list[Server], runs: list[Run], problems: list[str],
           seconds: float) -> str:
    lines = ["# Multi-turn chat: pier vs llama-server", "",
             f"- model: {model_shape(model)}", f"- machine: {machine()}",
             f"- OMP_WAIT_POLICY: {args.omp_wait_policy or omp_policy()}",
             f"- workload: {TURNS}-turn conversations, {INPUT_LEN}-token user messages, {OUTPUT_LEN}-token replies "
             f"sent back, {USERS} users, OpenAI chat API, streaming, temperature 0, ignore_eos; {args.repeats} "
             "repeats, interleaved; cells are median (min–max) over repeats",
             f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min", "", "```",
             *(s.shown() for s in servers), "```", "", *tables(runs, [s.label for s in servers]), ""]
    if problems:
        lines += ["## Failed requests", "", *[f"- {p}" for p in problems], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peers_dir(parser)
    parser.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"),
                        help="llama-server binary (default: $LLAMA_SERVER, else llama-server in --peers-dir or "
                             "$PIER_PEERS_DIR); ../shared/tools/build-llama-server.sh builds one")
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", help="also run pier from this `src` folder (another checkout, e.g. `git archive "
                                         "REF src | tar -x -C DIR`), labelled 'pier (before)'")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=VALUE",
                        help="also run a pier copy with this environment setting (repeatable), labelled "
                             "'pier NAME=VALUE'")
    parser.add_argument("--omp-wait-policy", choices=("active", "passive"),
                        help="OMP_WAIT_POLICY for every server (both use libgomp); default: this environment's")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    args = parser.parse_args()
    binary = Path(args.llama_server) if args.llama_server else peer("llama-server", args.peers_dir)
    if not binary.is_file():
        parser.error(f"{binary} (--llama-server) is not llama.cpp's llama-server binary")
    raise_on_sigterm()
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model()
    omp = args.omp_wait_policy
    servers = [pier_server(PIER, model, omp=omp)]
    if args.before:
        servers.append(pier_server("pier (before)", model, Path(args.before), omp))
    for setting in args.also:
        name, _, value = setting.partition("=")
        if not name or not value:
            parser.error(f"--also {setting!r}: write NAME=VALUE, such as PIER_BATCH_TOKENS=128")
        servers.append(pier_server(f"pier {setting}", model, omp=omp, settings=[(name, value)]))
    servers.append(llama_server(model, binary, omp))
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="pier-multi-turn-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch)
        logs.mkdir(parents=True, exist_ok=True)
        with running(Fleet(logs), servers):
            runs = measure(servers, args.repeats, problems)
    text = report(args, model, servers, runs, problems, time.monotonic() - started)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
