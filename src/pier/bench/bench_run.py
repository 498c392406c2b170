"""`pier bench`: resolve the targets, choose exact prompt tokens, warm up, run every load level (A/B/A/B when
comparing), then summarize, compare, print and write. A target that fails is measured as errors, not a crash.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from rich.console import Console

from pier.bench.calibration import choose_tokens
from pier.bench.compare import compare
from pier.bench.conversations import Conversations
from pier.bench.copies import CopyWatcher, copy_kernels
from pier.bench.engine_steps import EngineSteps
from pier.bench.load import Budget, LoadRun, closed_loop, open_loop, scheduled_loop
from pier.bench.metrics import Slo, summarize
from pier.bench.options import Api, BenchError, BenchOptions, Level
from pier.bench.plots import write_plots
from pier.bench.pricing import resolve_price
from pier.bench.progress import LiveProgress, RunProgress
from pier.bench.report import print_report, write_files
from pier.bench.result import BenchResult, RunResult, TargetInfo
from pier.bench.step_source import StepSource
from pier.bench.streaming_client import ClientSettings, StreamingClient, make_client
from pier.bench.subject import Subject, resolve
from pier.engine.kernels import host_line
from pier.gpus import discover
from pier.security.client_trust import TrustError, ca_bundle, connection_problem, ssl_context

MODELS_ROUTE = "/v1/models"
OPENAI_APIS = (Api.OPENAI_COMPLETIONS, Api.OPENAI_CHAT)


def run_bench(options: BenchOptions, console: Console | None = None) -> BenchResult:
    """Run the whole benchmark and return its results; prints progress and tables on `console` (stderr by
    default) and writes the files to `options.out` when set. Raises BenchError before any traffic when the
    options cannot work; never because a server fails."""
    return asyncio.run(Bench(options, console or Console(stderr=True)).run())


@dataclass
class PreparedTarget:
    info: TargetInfo
    client: StreamingClient
    steps: StepSource | None = None  # where a pier server's engine step times are read


class Bench:
    def __init__(self, options: BenchOptions, console: Console) -> None:
        self.options = options
        self.console = console
        self.targets = self._targets()
        self.price = resolve_price(options.price_per_hour, options.instance_type, options.instance_count)
        self.slo = Slo.from_ms(options.slo_ttft_ms, options.slo_tpot_ms, options.slo_e2el_ms)
        self.http: httpx.AsyncClient | None = None
        try:
            self.verify = ssl_context(ca_bundle(options.ca_bundle))
        except TrustError as error:
            raise BenchError(str(error)) from None

    async def run(self) -> BenchResult:
        o = self.options
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        async with httpx.AsyncClient(timeout=httpx.Timeout(o.timeout_s), limits=limits, verify=self.verify) as http:
            self.http = http
            prepared = await self._prepare(http)
            runs: list[RunResult] = []
            with LiveProgress(self.console, o.progress) as live:
                interrupted = await self._measure(prepared, live, runs)
            kernels = {p.info.label: await copy_kernels(http, p.info.url) for p in prepared}
        infos = [p.info for p in prepared]
        comparisons = compare(runs, infos[0], infos[1], o.levels) if len(infos) > 1 else []
        result = BenchResult(o, infos, runs, comparisons, self.price, interrupted=interrupted, device=discover(),
                             cpu=host_line(), kernels=kernels)
        if o.out is not None:
            result.files = write_files(result, o.out) + write_plots(result, o.out)
        print_report(result, self.console)  # --no-progress drops the live display, never the results
        return result

    def _targets(self) -> list[Subject]:
        o = self.options
        given = [o.target] + ([o.compare] if o.compare else [])
        names = [_short(t) for t in given]
        labels = [f"{'AB'[i]}: {name}" for i, name in enumerate(names)] if o.compare else names
        return [resolve(t, o.api, label=label, gateway=o.gateway) for t, label in zip(given, labels, strict=True)]

    async def _prepare(self, http: httpx.AsyncClient) -> list[PreparedTarget]:
        """A client per target; prompt tokens are chosen through the first, so both get the same prompts (token
        ids only when every target's API takes them)."""
        o = self.options
        clients = []
        for target in self.targets:
            await check_tls(http, target)
            model = o.model or await discover_model(http, target)
            settings = ClientSettings(model, o.temperature, o.timeout_s, o.api_key, o.inference_component)
            clients.append((target, model, make_client(http, target, settings, o.payload)))
        first_target, _, first_client = clients[0]
        ids = all(client.accepts_token_ids for _, _, client in clients)
        tokens = await choose_tokens(o, first_client, http, first_target.tokenizer, ids_allowed=ids)
        self.console.print(f"[dim]prompt tokens: {tokens.pool.kind}, {tokens.pool.source}[/]")  # before any run
        return [PreparedTarget(TargetInfo(t.label, t.url, t.api, model, tokens), c,
                               await StepSource.find(http, t, model))
                for t, model, c in clients]

    async def _warm_up(self, prepared: PreparedTarget, live: LiveProgress) -> PreparedTarget:
        """Requests nobody measures, so the first run does not pay for cold caches and connections."""
        if not self.options.warmup:
            return prepared
        closed = [int(level.value) for level in self.options.levels if level.mode == "concurrency"]
        users = min(self.options.warmup, max(closed, default=1))
        progress = live.run(f"{prepared.info.label} warm-up", self.options.warmup)
        session = self._session(prepared, "warmup", Budget.of(self.options.warmup, None), progress)
        await closed_loop(session, users)
        progress.close()
        errors = dict(Counter(r.error_code for r in session.records if r.error_code is not None))
        info = prepared.info
        warmed = TargetInfo(info.label, info.url, info.api, info.model, info.tokens, errors)
        return PreparedTarget(warmed, prepared.client, prepared.steps)

    async def _measure(self, prepared: list[PreparedTarget], live: LiveProgress, runs: list[RunResult]) -> bool:
        """Warm up, then every run into `runs`; True when interrupted (Ctrl-C), keeping the runs that finished."""
        try:
            prepared[:] = [await self._warm_up(p, live) for p in prepared]
            for level in self.options.levels:
                for repeat in range(self.options.repeat_count):
                    for target in prepared:  # interleaved: A, B, A, B
                        runs.append(await self._run(target, level, repeat, live))
        except asyncio.CancelledError:
            return True
        return False

    async def _run(self, prepared: PreparedTarget, level: Level, repeat: int, live: LiveProgress) -> RunResult:
        o = self.options
        seed = f"{o.seed}:{level.mode}:{level.value}:{repeat}"  # same prompts for A and B, fresh per repeat
        suffix = f" #{repeat + 1}" if o.repeat_count > 1 else ""
        progress = live.run(f"{prepared.info.label} {level.label}{suffix}", o.request_limit)
        budget = Budget.of(None, None) if level.mode == "schedule" else Budget.of(o.request_limit, o.duration_s)
        session = self._session(prepared, seed, budget, progress)
        started_at, started = time.time(), time.perf_counter()
        watcher = None
        if level.mode == "schedule" and self.http is not None:
            watcher = CopyWatcher.of(self.http, prepared.info.url, started)
        watching = asyncio.create_task(watcher.run()) if watcher is not None else None
        steps_before = await prepared.steps.read() if prepared.steps is not None else None
        try:
            if level.mode == "concurrency":
                await closed_loop(session, int(level.value))
            elif level.mode == "schedule":
                await scheduled_loop(session, level.schedule, random.Random(f"{seed}:arrivals"))
            else:
                await open_loop(session, level.value, random.Random(f"{seed}:arrivals"))
        finally:
            if watching is not None:
                watching.cancel()
                await asyncio.gather(watching, return_exceptions=True)
        duration = time.perf_counter() - started
        progress.close()
        engine = None
        if prepared.steps is not None and steps_before is not None:
            engine = EngineSteps.between(steps_before, await prepared.steps.read())
        metrics = summarize(session.records, duration, self.slo)
        return RunResult(prepared.info, level, repeat, started_at, started, session.records, metrics,
                         watcher.samples if watcher is not None else [], engine)

    def _session(self, prepared: PreparedTarget, seed: str, budget: Budget, progress: RunProgress) -> LoadRun:
        workload = Conversations(self.options, prepared.info.tokens.pool, seed)
        return LoadRun(workload.conversations(), prepared.client.send, budget, progress.observe)


async def check_tls(http: httpx.AsyncClient, target: Subject) -> None:
    """An https:// target whose certificate this machine does not trust (or that speaks no TLS) cannot be
    measured: BenchError, before any traffic, saying how to trust it. Anything else is measured as errors."""
    if urlsplit(target.url).scheme != "https":
        return
    try:
        await http.head(target.base_url)
    except httpx.HTTPError as error:
        problem = connection_problem(target.base_url, error)
        if problem is not None:
            raise BenchError(problem) from None


async def discover_model(http: httpx.AsyncClient, target: Subject) -> str | None:
    """The first model the server lists (vLLM needs the name; pier and llama-server ignore it), or None."""
    if target.api not in OPENAI_APIS:
        return None
    try:
        response = await http.get(target.base_url + MODELS_ROUTE)
        models = response.json().get("data") if response.status_code == httpx.codes.OK else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if isinstance(models, list) and models and isinstance(models[0], dict):
        return models[0].get("id")
    return None


def _short(target: str) -> str:
    """A target's name in tables and plots: host:port for a URL, the endpoint name for a pier endpoint."""
    return (urlsplit(target).netloc or target) if "://" in target else target
