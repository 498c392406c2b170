"""pier's model server against its peers on this machine, all driven by one client (pier bench's `run_bench`).

    python benchmarks/serving_vs_peers.py                                   # everything: ~20 min on 2 cores
    python benchmarks/serving_vs_peers.py --repeats 5 --out report.md       # more repeats, report also to a file
    python benchmarks/serving_vs_peers.py --only baseline,prefix            # some comparisons only

Every server runs on loopback with 2 threads, 4096 KV cells in one unified cache and 8 parallel sequences:
  pier            python -m pier.server.container --model M --threads 2 --parallel 8, MAX_BATCH_TOTAL_TOKENS=4096
                  (PIER_PREFIX_CACHE=false where the peer caches nothing)
  llama-server    -m M -t 2 -tb 2 -c 4096 -np 8 --kv-unified (+ --no-cache-prompt --cache-ram 0 where cache-less)
  llama_cpp.server  python -m llama_cpp.server --model M --n_threads 2 --n_ctx 4096 --interrupt_requests False
                  (serves one request at a time; without the flag a waiting request cuts the running stream short)
  gateway         python -m pier.gateway, one endpoint of one copy (as pier, prefix cache off)

Comparisons (`--only` names), each A/B/A/B: per load level, repeat 1 of every server, then repeat 2, ...; the
servers of a comparison are all up, idle while another is measured, and stopped before the next comparison:
  baseline   64-token prompts, 32 output tokens, c = 1, 4, 8, 16: pier (cache off; and on) vs llama-server (off)
  prefix     512 shared tokens + 64-token user part, 32 output, c = 8: both with their caches on
  llamacpp   c = 4, pier (cache off) vs llama_cpp.server; text prompts of single-token words (it takes no ids)
  gateway    c = 4, through the gateway's /v1/completions (model = endpoint) vs straight at the copy's URL
  omp        pier alone, OMP_WAIT_POLICY unset (OpenMP spins, then sleeps) vs passive, c = 1 and 8

Each run: OpenAI completions API, streaming, token-id prompts drawn from the model's vocabulary (--vocab),
ignore_eos, temperature 0, fixed lengths, the same prompts for every server of a repeat; one discarded warm-up run
per server first. The report gives medians over repeats with the min-max spread, and pier/peer ratios both of
the medians and per repeat (paired: the machine is noisy, so only ratios measured side by side mean much).
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from common import bench_model, free_port, omp_policy, peers_dir, raise_on_sigterm
from rich.console import Console

import pier.bench.calibration
from pier.bench import Api, BenchOptions, PromptFormat, WorkloadKind, run_bench
from pier.bench.metrics import MS, Metrics
from pier.bench.vocabulary import TokenPool

THREADS = 2
CONTEXT = 4096  # KV cells shared by all sequences (llama.cpp's n_ctx)
# llama-server keeps a copy of the shared prefix per slot: 8 x (512 + 64 + 32) = 4864 cells do not fit in 4096
# ("Context size has been exceeded"), so the shared-prefix comparison gives both servers twice the cells.
PREFIX_CONTEXT = 8192
PARALLEL = 8
HOST = "127.0.0.1"
ENDPOINT = "peers-bench"
READY_TIMEOUT_S = 300.0
STOP_GRACE_S = 30.0  # pier drains in-flight requests on SIGTERM; the gateway then stops its copy the same way
SECTIONS = ("baseline", "prefix", "llamacpp", "gateway", "omp")

# run_bench reads the GGUF's vocabulary on every call (~3 s here); this script calls it once per run, so read it
# once: the pool, and so the prompts, are the same either way.
pier.bench.calibration.ids_from_gguf = functools.lru_cache(maxsize=None)(pier.bench.calibration.ids_from_gguf)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---- servers ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """One server process this script starts: its command line, environment changes and readiness route."""

    label: str
    argv: tuple[str, ...]
    port: int
    ready_path: str
    env: tuple[tuple[str, str | None], ...] = ()  # changes to this script's environment; None unsets

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        for key, value in self.env:
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def shown(self) -> str:
        """The command as a reader would type it: environment changes first, paths shortened to their names."""
        changes = [f"{k}={v}" if v is not None else f"-u {k}" for k, v in self.env]
        prefix = f"env {' '.join(changes)} " if changes else ""
        words = [Path(w).name if "/" in w and not w.startswith("http") else w for w in self.argv]
        words = ["python" if w == Path(sys.executable).name else w for w in words]
        return prefix + shlex.join(words)


@dataclass(frozen=True)
class Catalog:
    """The servers this benchmark compares, all with the same model, threads, context and parallel sequences."""

    model: Path
    llama_server: Path

    def pier(self, label: str, *, cache: bool, omp: str | bool | None = True, ctx: int = CONTEXT) -> Server:
        """`omp`: True keeps this script's OMP_WAIT_POLICY; a string sets it; None unsets it."""
        env: list[tuple[str, str | None]] = [("MAX_BATCH_TOTAL_TOKENS", str(ctx))]
        if not cache:
            env.append(("PIER_PREFIX_CACHE", "false"))
        if omp is not True:
            env.append(("OMP_WAIT_POLICY", omp if isinstance(omp, str) else None))
        port = free_port()
        argv = (sys.executable, "-m", "pier.server.container", "--model", str(self.model), "--port", str(port),
                "--host", HOST, "--threads", str(THREADS), "--parallel", str(PARALLEL))
        return Server(label, argv, port, "/ping", tuple(env))

    def llama(self, label: str, *, cache: bool, ctx: int = CONTEXT) -> Server:
        port = free_port()
        argv = (str(self.llama_server), "-m", str(self.model), "-t", str(THREADS), "-tb", str(THREADS),
                "-c", str(ctx), "-np", str(PARALLEL), "--kv-unified", "--host", HOST, "--port", str(port))
        # --no-cache-prompt stops reuse within a slot; --cache-ram 0 also turns off the host-memory prompt cache.
        off = ("--no-cache-prompt", "--cache-ram", "0")
        return Server(label, argv + (() if cache else off), port, "/health")

    def llama_cpp_python(self, label: str) -> Server:
        port = free_port()
        argv = (sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--n_threads", str(THREADS),
                "--n_ctx", str(CONTEXT), "--interrupt_requests", "False", "--host", HOST, "--port", str(port))
        return Server(label, argv, port, "/v1/models")

    def gateway(self, label: str, state_dir: Path) -> Server:
        port = free_port()
        argv = (sys.executable, "-m", "pier.gateway", "--port", str(port), "--host", HOST, "--state-dir",
                str(state_dir), "--log-level", "warning")
        return Server(label, argv, port, "/ping")


@dataclass
class Fleet:
    """The processes this script started, each the leader of its own process group, so stopping one stops
    whatever it started too, and Ctrl-C at the terminal reaches only this script (which then stops them)."""

    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra_pids: list[int] = field(default_factory=list)  # started on our behalf (the gateway's copy)

    def start(self, server: Server) -> None:
        log_file = (self.logs / f"{slug(server.label)}.log").open("ab")
        self.processes[server.label] = subprocess.Popen(
            server.argv, env=server.environment(), stdout=log_file, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        log_file.close()

    def wait_ready(self, server: Server) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        process = self.processes[server.label]
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"{server.label} exited ({process.returncode}) before it was ready; see "
                                   f"{self.logs / slug(server.label)}.log")
            try:
                if httpx.get(server.url + server.ready_path, timeout=2, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{server.label} was not ready within {READY_TIMEOUT_S:.0f} s")

    def stop(self, label: str) -> None:
        process = self.processes.pop(label)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def stop_all(self) -> None:
        for label in list(self.processes):
            self.stop(label)
        for pid in self.extra_pids:  # the gateway stops its copy; this only catches one left behind
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.extra_pids.clear()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def slug(label: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in label).strip("-").lower()


@contextmanager
def running(fleet: Fleet, servers: Sequence[Server]) -> Iterator[None]:
    """Start every server of a comparison at once (they load in parallel), wait for all, stop all afterwards."""
    try:
        for server in servers:
            fleet.start(server)
        for server in servers:
            fleet.wait_ready(server)
        log("ready: " + ", ".join(f"{s.label} at {s.url}" for s in servers))
        yield
    finally:
        fleet.stop_all()


def deploy_endpoint(gateway: Server, model: Path, fleet: Fleet) -> tuple[str, str]:
    """One endpoint of one copy (prefix cache off, same context) on the gateway; returns its copy's URL and the
    copy's command line."""
    from pier.control.client import PierClient
    from pier.control.deploy_file import DeployFile, ModelBlock

    client = PierClient(gateway.url)
    environment = {"MAX_BATCH_TOTAL_TOKENS": str(CONTEXT), "PIER_PARALLEL": str(PARALLEL), "PIER_PREFIX_CACHE": "false"}
    client.deploy(DeployFile(endpoint=ENDPOINT, model=ModelBlock(data=str(model), environment=environment)), Path.cwd())
    copy = client.copies(ENDPOINT)[0]
    fleet.extra_pids.append(int(copy["pid"]))
    cmdline = Path(f"/proc/{copy['pid']}/cmdline").read_bytes().split(b"\0")
    shown = " ".join(Path(w.decode()).name if w.startswith(b"/") else w.decode() for w in cmdline if w)
    return str(copy["url"]).rstrip("/"), f"env {' '.join(f'{k}={v}' for k, v in environment.items())} {shown}"


# ---- measuring -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arm:
    """One server as the benchmark sees it: its completions route, and the model name to send (None: any)."""

    label: str
    url: str
    model: str | None = None


@dataclass(frozen=True)
class Shape:
    input_len: int = 64
    output_len: int = 32
    shared_prefix: int = 0
    ids: bool = True


Runs = dict[tuple[str, int], list[Metrics]]  # (arm label, concurrency) -> one Metrics per repeat


@dataclass
class Measurer:
    model: Path
    requests: int
    repeats: int
    quiet: Console = field(default_factory=lambda: Console(file=io.StringIO()))
    problems: list[str] = field(default_factory=list)
    pool: TokenPool | None = None  # the prompt tokens of the comparison under way: every run must get the same

    def once(self, arm: Arm, shape: Shape, concurrency: int, requests: int, seed: int) -> Metrics:
        """One run of `requests` at closed-loop `concurrency`; the seed picks the prompts (same seed, same prompts)."""
        options = BenchOptions(
            target=arm.url, api=Api.OPENAI_COMPLETIONS, model=arm.model, concurrency=(concurrency,),
            requests=requests, warmup=0, repeats=1, timeout_s=180.0, seed=seed,
            workload=WorkloadKind.SHARED_PREFIX if shared_prefix(shape) else WorkloadKind.RANDOM,
            input_len=shape.input_len, output_len=shape.output_len, shared_prefix=shape.shared_prefix,
            prompt_format=PromptFormat.IDS if shape.ids else PromptFormat.TEXT,
            vocab=self.model if shape.ids else None, temperature=0.0, progress=False)
        result = run_bench(options, self.quiet)
        if result.interrupted or not result.runs:
            raise KeyboardInterrupt("benchmark interrupted")
        run = result.runs[0]
        self.same_prompts(arm, result.targets[0].tokens.pool)
        if run.metrics.failed:
            why = sorted({f"{r.error_code}: {r.error_message}" for r in run.records if r.error_code is not None})
            self.problems.append(f"{arm.label} c={concurrency} seed {seed}: {run.metrics.failed} of "
                                 f"{run.metrics.started} requests failed ({'; '.join(why)})")
        return run.metrics

    def same_prompts(self, arm: Arm, pool: TokenPool) -> None:
        """Text prompts are chosen through each server (run_bench checks words through the server's usage), so a
        server that reports no usage could get other words: then the comparison would not be like for like."""
        if self.pool is None:
            self.pool = pool
        elif (pool.kind, pool.ids, pool.words) != (self.pool.kind, self.pool.ids, self.pool.words):
            self.problems.append(f"{arm.label}: prompts drawn from other tokens ({pool.source}) than the other "
                                 f"servers' ({self.pool.source})")

    def interleaved(self, arms: Sequence[Arm], shape: Shape, levels: Sequence[int]) -> Runs:
        """A warm-up run per server, then for each level: repeat 1 of every arm, repeat 2 of every arm, ..."""
        self.pool = None
        for arm in arms:
            self.once(arm, shape, min(4, max(levels)), 4, seed=10_000)
        runs: Runs = {}
        for c in levels:
            for repeat in range(self.repeats):
                for arm in arms:
                    metrics = self.once(arm, shape, c, max(self.requests, 2 * c), seed=repeat)
                    runs.setdefault((arm.label, c), []).append(metrics)
                    log(f"c={c} #{repeat + 1} {arm.label}: {metrics.output_throughput:.1f} tok/s, "
                        f"TTFT p50 {metrics.ttft.median * MS:.0f} ms, {metrics.completed}/{metrics.started} ok")
        return runs


def shared_prefix(shape: Shape) -> bool:
    return shape.shared_prefix > 0


# ---- numbers and report ----------------------------------------------------------------------------------------

Metric = Callable[[Metrics], float]
COLUMNS: tuple[tuple[str, Metric], ...] = (
    ("output tok/s", lambda m: m.output_throughput),
    ("req/s", lambda m: m.request_throughput),
    ("TTFT p50 ms", lambda m: m.ttft.median * MS),
    ("TTFT p99 ms", lambda m: m.ttft.percentiles[99] * MS),
    ("TPOT p50 ms", lambda m: m.tpot.median * MS),
    ("ITL p50 ms", lambda m: m.itl.median * MS),
)
TOKS: Metric = COLUMNS[0][1]
TTFT: Metric = COLUMNS[2][1]


def num(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def median_of(runs: Runs, label: str, c: int, metric: Metric) -> float:
    return statistics.median(metric(m) for m in runs[(label, c)])


def spread(values: Sequence[float]) -> str:
    return f"{num(statistics.median(values))} ({num(min(values))}–{num(max(values))})"


def ratio(runs: Runs, a: str, b: str, c: int, metric: Metric) -> float:
    """a / b of the medians over repeats."""
    below = median_of(runs, b, c, metric)
    return median_of(runs, a, c, metric) / below if below else float("nan")


def paired(runs: Runs, a: str, b: str, c: int, metric: Metric) -> list[float]:
    """a / b within each repeat: the two runs of a pair ran minutes apart at most, under the same noise."""
    return [metric(x) / metric(y) for x, y in zip(runs[(a, c)], runs[(b, c)], strict=True) if metric(y)]


@dataclass(frozen=True)
class Check:
    target: str
    measured: str
    met: bool


@dataclass
class Section:
    title: str
    about: str
    commands: list[str]
    arms: list[Arm]
    levels: list[int]
    shape: Shape
    runs: Runs
    pairs: list[tuple[str, str]]  # (numerator, denominator) labels for the ratio table
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def results_table(section: Section) -> list[str]:
    lines = ["| c | server | " + " | ".join(name for name, _ in COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    for c in section.levels:
        for arm in section.arms:
            cells = [spread([metric(m) for m in section.runs[(arm.label, c)]]) for _, metric in COLUMNS]
            lines.append(f"| {c} | {arm.label} | " + " | ".join(cells) + " |")
    return lines


def ratio_table(section: Section) -> list[str]:
    lines = ["| c | ratio | output tok/s: of medians (per repeat, min–max) | TTFT p50: of medians (per repeat) |",
             "|---|---|---|---|"]
    for c in section.levels:
        for a, b in section.pairs:
            cells = []
            for metric in (TOKS, TTFT):
                pairs = paired(section.runs, a, b, c, metric)
                each = f"{min(pairs):.2f}–{max(pairs):.2f}" if pairs else "n/a"
                cells.append(f"{ratio(section.runs, a, b, c, metric):.2f}x ({each})")
            lines.append(f"| {c} | {a} / {b} | " + " | ".join(cells) + " |")
    return lines


def render_section(section: Section) -> list[str]:
    s = section.shape
    prompt = f"{s.shared_prefix} shared + {s.input_len}" if s.shared_prefix else f"{s.input_len}"
    lines = [f"## {section.title}", "", section.about, "",
             f"Prompt {prompt} tokens ({'token ids' if s.ids else 'text of single-token words'}), "
             f"{s.output_len} output tokens; {section.seconds / 60:.1f} min.", "", "```"]
    lines += [*section.commands, "```", "", *results_table(section), "", *ratio_table(section), ""]
    if section.checks:
        lines += ["| target | measured | |", "|---|---|---|"]
        lines += [f"| {k.target} | {k.measured} | {'met' if k.met else '**missed**'} |" for k in section.checks]
        lines.append("")
    return lines + [f"- {note}" for note in section.notes] + ([""] if section.notes else [])


def model_shape(path: Path) -> str:
    from gguf import GGUFReader

    fields = GGUFReader(path).fields

    def value(key: str) -> object:
        return fields[key].contents() if key in fields else "?"

    arch = value("general.architecture")
    keys = {"n_embd": "embedding_length", "n_layer": "block_count", "n_ff": "feed_forward_length",
            "n_head": "attention.head_count", "n_head_kv": "attention.head_count_kv"}
    shape = ", ".join(f"{name} {value(f'{arch}.{key}')}" for name, key in keys.items())
    vocab = len(fields["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in fields else "?"
    return f"`{path.name}` ({path.stat().st_size / 1e6:.0f} MB, {arch}: {shape}, n_vocab {vocab}; random weights)"


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    return f"{os.cpu_count()} × {cpu}, load average before start {os.getloadavg()[0]:.2f}"


# ---- the comparisons -------------------------------------------------------------------------------------------


def completions(server: Server | str) -> str:
    return (server.url if isinstance(server, Server) else server) + "/v1/completions"


def baseline(catalog: Catalog, fleet: Fleet, measurer: Measurer, levels: list[int]) -> Section:
    off, on = catalog.pier("pier (cache off)", cache=False), catalog.pier("pier (cache on)", cache=True)
    llama = catalog.llama("llama-server (cache off)", cache=False)
    shape = Shape()
    with running(fleet, [off, on, llama]):
        arms = [Arm(s.label, completions(s)) for s in (off, on, llama)]
        runs = measurer.interleaved(arms, shape, levels)
    section = Section("Random prompts: pier vs llama-server, no prompt caching",
                      "Fair to a cache-less baseline: pier's prefix cache off (and, for reference, on: random "
                      "prompts share nothing, so it can only cost).",
                      [s.shown() for s in (off, on, llama)], arms, levels, shape, runs,
                      [(off.label, llama.label), (on.label, llama.label)])
    for c in (c for c in (1, 4, 8) if c in levels):
        toks, ttft = ratio(runs, off.label, llama.label, c, TOKS), ratio(runs, off.label, llama.label, c, TTFT)
        section.checks += [
            Check(f"c={c}: output tok/s ≥ 1.0x llama-server", f"{toks:.2f}x", toks >= 1.0),
            Check(f"c={c}: TTFT p50 no worse than llama-server", f"{ttft:.2f}x its TTFT", ttft <= 1.0)]
    return section


def prefix(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    pier_ = catalog.pier("pier (cache on)", cache=True, ctx=PREFIX_CONTEXT)
    llama = catalog.llama("llama-server (cache on)", cache=True, ctx=PREFIX_CONTEXT)
    levels, shape = [8], Shape(shared_prefix=512)
    with running(fleet, [pier_, llama]):
        arms = [Arm(s.label, completions(s)) for s in (pier_, llama)]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, pier_.label, llama.label, 8, TOKS)
    requests = max(measurer.requests, 16)
    notes = [f"Both servers get {PREFIX_CONTEXT} KV cells here: llama-server holds a copy of the prefix in each slot, "
             f"and 8 x (512 + 64 + 32) = 4864 cells exceed {CONTEXT} (it fails the requests with \"Context size has "
             "been exceeded\"); pier holds one copy, 512 + 8 x 96 = 1280 cells.",
             f"A run is {requests} requests on a new prefix. pier computes the prefix once per run; llama-server "
             "once per slot (its first 8 requests each compute all 576 tokens; later ones in a slot reuse it), so "
             "its cost is amortized over more requests per prefix and the ratio shrinks as runs get longer."]
    return Section("Shared prefix: pier's prefix cache vs llama-server's prompt cache",
                   "Every request of a run starts with the same 512 tokens (a new prefix per run), then its own 64.",
                   [s.shown() for s in (pier_, llama)], arms, levels, shape, runs, [(pier_.label, llama.label)],
                   [Check("c=8: output tok/s ≥ 2x llama-server", f"{toks:.2f}x", toks >= 2.0)], notes)


def llamacpp(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    pier_, peer = catalog.pier("pier (cache off)", cache=False), catalog.llama_cpp_python("llama_cpp.server")
    levels, shape = [4], Shape(ids=False)
    with running(fleet, [pier_, peer]):
        arms = [Arm(s.label, completions(s)) for s in (pier_, peer)]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, pier_.label, peer.label, 4, TOKS)
    notes = ["llama_cpp.server takes no token-id prompts and has no `ignore_eos`: prompts are text of words that "
             "are one token each (checked through pier's usage; the same tokenizer), and its output tokens are "
             "counted from its stream (it sends no usage). "
             + (f"Every answer it gave had {shape.output_len} tokens, as asked." if all_full(runs, peer.label, shape)
                else f"Some of its answers ended (EOS) before {shape.output_len} tokens: its numbers are not like "
                     "for like.")]
    return Section("pier vs llama-cpp-python's server", "One request at a time behind a lock (its design).",
                   [s.shown() for s in (pier_, peer)], arms, levels, shape, runs, [(pier_.label, peer.label)],
                   [Check("c=4: output tok/s ≥ 3x llama_cpp.server", f"{toks:.2f}x", toks >= 3.0)], notes)


def all_full(runs: Runs, label: str, shape: Shape) -> bool:
    return all(m.output_tokens.min == shape.output_len for (arm, _), ms in runs.items() if arm == label for m in ms)


def gateway(catalog: Catalog, fleet: Fleet, measurer: Measurer, state_dir: Path) -> Section:
    gw = catalog.gateway("gateway", state_dir)
    levels, shape = [4], Shape()
    with running(fleet, [gw]):
        copy_url, copy_command = deploy_endpoint(gw, catalog.model, fleet)
        log(f"endpoint {ENDPOINT} in service; its copy at {copy_url}")
        arms = [Arm("through the gateway", completions(gw), model=ENDPOINT), Arm("the copy directly",
                                                                                  completions(copy_url))]
        runs = measurer.interleaved(arms, shape, levels)
    toks = ratio(runs, arms[0].label, arms[1].label, 4, TOKS)
    return Section("Gateway overhead: one endpoint of one copy",
                   f"The same copy, called through `{completions('http://GATEWAY')}` with model={ENDPOINT} or at "
                   "its own URL (from `PierClient(url).copies(name)`).",
                   [gw.shown(), f"# deployed by PierClient.deploy; the copy runs:\n{copy_command}"], arms, levels,
                   shape, runs, [(arms[0].label, arms[1].label)],
                   [Check("c=4: gateway costs ≤ 5% of throughput", f"{(1 - toks) * 100:+.1f}% ({toks:.3f}x)",
                          toks >= 0.95)])


def omp(catalog: Catalog, fleet: Fleet, measurer: Measurer) -> Section:
    spin = catalog.pier("pier, OMP_WAIT_POLICY unset", cache=False, omp=None)
    passive = catalog.pier("pier, OMP_WAIT_POLICY=passive", cache=False, omp="passive")
    levels, shape = [1, 8], Shape()
    with running(fleet, [spin, passive]):
        arms = [Arm(s.label, completions(s)) for s in (spin, passive)]
        runs = measurer.interleaved(arms, shape, levels)
    notes = [omp_finding(runs, spin.label, passive.label, c) for c in levels]
    return Section("OMP_WAIT_POLICY for pier: OpenMP's default vs passive",
                   "The model server runs its asyncio thread beside the engine's 2 OpenMP threads on 2 cores.",
                   [s.shown() for s in (spin, passive)], arms, levels, shape, runs, [(passive.label, spin.label)],
                   notes=notes)


def omp_finding(runs: Runs, spin: str, passive: str, c: int) -> str:
    toks = ratio(runs, passive, spin, c, TOKS)
    pairs = paired(runs, passive, spin, c, TOKS)
    wins = sum(p > 1 for p in pairs)
    faster = "passive" if toks > 1 else "unset (spin)"
    return (f"c={c}: {faster} is faster, passive/unset output tok/s {toks:.3f}x; passive won {wins} of "
            f"{len(pairs)} pairs")


# ---- main ------------------------------------------------------------------------------------------------------


def report(args: argparse.Namespace, model: Path, sections: list[Section], problems: list[str],
           seconds: float, complete: bool) -> str:
    lines = ["# pier vs llama-server and llama-cpp-python's server", "",
             f"- model: {model_shape(model)}",
             f"- machine: {machine()}",
             f"- OMP_WAIT_POLICY for every server (except the omp comparison): {omp_policy()}",
             f"- every server: {THREADS} threads, {CONTEXT} KV cells in one unified cache ({PREFIX_CONTEXT} in the "
             f"shared-prefix comparison), {PARALLEL} parallel "
             "sequences, loopback",
             f"- client: pier bench (run_bench), OpenAI completions, streaming, ignore_eos, temperature 0; "
             f"max({args.requests}, 2·c) requests per run, {args.repeats} repeats, one warm-up run per server; "
             "cells are median (min–max) over repeats",
             f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min"
             + ("" if complete else " (**interrupted**: partial results)"), ""]
    for section in sections:
        lines += render_section(section)
    checks = [k for s in sections for k in s.checks]
    if checks:
        lines += ["## Targets", ""] + [f"- {'met' if k.met else '**missed**'}: {k.target} — {k.measured}"
                                       for k in checks] + [""]
    if problems:
        lines += ["## Failed requests", ""] + [f"- {p}" for p in problems] + [""]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    model = Path(args.model) if args.model else bench_model()
    catalog = Catalog(model, peers_dir() / "llama-server")
    measurer = Measurer(model, args.requests, args.repeats)
    sections: list[Section] = []
    complete = False
    with tempfile.TemporaryDirectory(prefix="pier-peers-") as scratch:
        logs = Path(args.logs) if args.logs else Path(scratch) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(logs)
        steps: dict[str, Callable[[], Section]] = {
            "baseline": lambda: baseline(catalog, fleet, measurer, args.levels),
            "prefix": lambda: prefix(catalog, fleet, measurer),
            "llamacpp": lambda: llamacpp(catalog, fleet, measurer),
            "gateway": lambda: gateway(catalog, fleet, measurer, Path(scratch) / "gateway"),
            "omp": lambda: omp(catalog, fleet, measurer),
        }
        try:
            for name in args.only:
                log(f"--- {name}")
                begun = time.monotonic()
                sections.append(steps[name]())
                sections[-1].seconds = time.monotonic() - begun
            complete = True
        except KeyboardInterrupt:
            log("interrupted: stopping the servers")
        finally:
            fleet.stop_all()
    text = report(args, model, sections, measurer.problems, time.monotonic() - started, complete)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="GGUF to serve (default: the 360M-class Q4_0 model, built once)")
    parser.add_argument("--requests", type=int, default=16, help="requests per run (at least 2 per user)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--levels", default="1,4,8,16", help="concurrency levels of the baseline comparison")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated, from {', '.join(SECTIONS)}")
    parser.add_argument("--out", help="also write the markdown report to this file")
    parser.add_argument("--logs", help="keep the servers' logs in this folder (default: a temporary one)")
    args = parser.parse_args()
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    args.levels = [int(level) for level in args.levels.split(",")]
    if unknown := [name for name in args.only if name not in SECTIONS]:
        parser.error(f"--only: unknown {unknown}; choose from {', '.join(SECTIONS)}")
    raise_on_sigterm()
    run(args)


if __name__ == "__main__":
    main()
