"""The seeds' crowd: the multi-replica seed's k6 load (1,000-token prompts, 50 generated tokens, closed-loop
users) from 25 up to 500 concurrent users, against a pier endpoint of several copies through the SageMaker
runtime, and against llama-server behind the same client; the seed's table for each.

    python benchmarks/crowd.py --peers-dir DIR --out crowd.md                       # 25..500 users, 60 s each
    python benchmarks/crowd.py --peers-dir DIR --levels 4,16 --duration 10 --out /tmp/crowd.md   # smoke test

pier: a gateway (`python -m pier.gateway`, as `pier up` starts it) with one endpoint hosting one inference
component of COPIES copies of one CPU each, invoked as the seed's k6 script invokes SageMaker: POST
/endpoints/crowd/invocations with the InferenceComponentName header and TGI's payload ({"inputs": ...,
"parameters": {"max_new_tokens": 50, ...}}). Two copies of one thread on a 2-core machine: a prefill of 1,000
tokens barely gains from a second thread, and the point is the seed's, several copies behind one endpoint with
the gateway's routing and admission in front. llama-server: one process with the same model, the same total
threads (COPIES x 1), as many parallel slots as the copies together (COPIES x PARALLEL), its prompt caches off
(random prompts share nothing), answering OpenAI completions with `ignore_eos`.

Both servers are driven by pier bench's client and closed loop (`pier.bench.run_bench`: each user sends its
next request when its last one ended), with the same text prompts (words that are one token each, so exactly
INPUT_LEN tokens) and 50 output tokens, for `--duration` seconds per level, the servers interleaved level by
level. Requests still running at the end of a level are waited for and counted. Every request counts: a
timeout, a connection error, a 4xx/5xx all fail the success rate, each listed with its reason. The client
waits up to `--timeout` seconds (300 by default: waiting must not be failing); k6's default was 60 s.

The model: a 1,000-token prompt through the 360M benchmark model takes ~4 s on these cores, so 500 users would
take hours. The crowd measures the serving system (queueing, admission, routing, waiting instead of failing),
not the kernels, so it uses a small synthetic model (CROWD_SHAPE, random weights) whose 1,000-token prefill takes
~100 ms on one thread; the report says so.
"""

from __future__ import annotations

import argparse
import io
import resource
import shlex
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import peers
from common import add_peers_dir, cached_model, log, omp_policy, peer, raise_on_sigterm
from crowd_table import DEFAULT_LEVELS, Row, failure_lines, parse_levels, ratio_lines, seed_table
from peers import Catalog, Fleet, Server, running
from report import machine, model_shape
from rich.console import Console

from pier.bench.bench_run import run_bench
from pier.bench.options import Api, BenchOptions, PromptFormat
from pier.bench.result import BenchResult
from pier.synthetic.builder import ModelShape

CROWD_SHAPE = ModelShape(n_vocab=2048, n_embd=128, n_layer=4, n_ff=384, n_head=4, n_head_kv=2)
ENDPOINT = "crowd"
COMPONENT = "crowd-llm"
COPIES = 2
CPUS_PER_COPY = 1
PARALLEL = 4  # sequences a copy runs at once; llama-server gets COPIES x PARALLEL slots
INPUT_LEN = 1000
OUTPUT_LEN = 50
CELLS_PER_SEQUENCE = 1152  # 1,000 prompt + 50 output tokens, with room for a BOS and the tokenizer's rounding
PIER_LABEL = "pier"
LLAMA_LABEL = "llama-server"


def crowd_model() -> Path:
    """CROWD_SHAPE as Q8_0."""
    return cached_model("crowd-128x4-q8_0.gguf", CROWD_SHAPE, "Q8_0")


def gateway_environment(timeout_s: float, users: int) -> tuple[tuple[str, str], ...]:
    """The gateway waits as long as the client does: SageMaker's invocations end at 60 s (boto3's read timeout)
    and the admission queue gives up after 30 s with a ThrottlingException that boto3 retries; these users do not
    retry, they wait `--timeout`, so the gateway's deadline, its queue's wait and its queue's length (every user
    may be waiting at once) follow them."""
    return (
        ("PIER_INVOCATION_TIMEOUT_SECONDS", f"{timeout_s:g}"),
        ("PIER_QUEUE_TIMEOUT_SECONDS", f"{timeout_s:g}"),
        ("PIER_QUEUE_SIZE", str(max(users, 512))),
    )


def copy_environment() -> dict[str, str]:
    return {
        "PIER_PARALLEL": str(PARALLEL),
        "MAX_BATCH_TOTAL_TOKENS": str(PARALLEL * CELLS_PER_SEQUENCE),
        "PIER_PREFIX_CACHE": "false",
        "PIER_HOST_CACHE_MB": "0",
    }


def llama_server(binary: Path, model: Path) -> Server:
    """llama-server with the copies' threads and slots in one process (peers.py's, prompt caches off). Its HTTP
    threads are left at their default: this llama.cpp keeps `--threads-http` threads and adds up to 1,024 more
    while connections wait, so 500 users' requests reach its own queue, as pier's reach the gateway's."""
    assert COPIES * CPUS_PER_COPY == peers.THREADS and COPIES * PARALLEL == peers.PARALLEL, "keep peers.py's sizes"
    return Catalog(model, binary).llama(LLAMA_LABEL, cache=False, ctx=peers.PARALLEL * CELLS_PER_SEQUENCE)


def deploy(gateway: Server, model: Path, fleet: Fleet) -> list[str]:
    """The endpoint with its component's copies, ready; returns the copies' command lines for the report."""
    from pier.client.deploy_file import ComponentBlock, DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    client = PierClient(gateway.url, timeout_s=60.0)
    component = ComponentBlock(
        name=COMPONENT, copies=COPIES, cpus=CPUS_PER_COPY, memory_mb=1024,
        model=ModelBlock(data=str(model), environment=copy_environment()),
    )  # fmt: skip
    client.deploy(DeployFile(endpoint=ENDPOINT, components=[component]), Path.cwd(), timeout_s=600.0)
    copies = client.copies(ENDPOINT)
    if len(copies) != COPIES:
        raise RuntimeError(f"the endpoint has {len(copies)} copies, not {COPIES}: see the gateway's log")
    fleet.extra_pids.extend(int(copy["pid"]) for copy in copies)
    changes = " ".join(f"{key}={value}" for key, value in copy_environment().items())
    return [f"env {changes} {shown_command(int(copy['pid']))}" for copy in copies]


def route(name: str, server: Server) -> str:
    """Where the load goes: SageMaker's InvokeEndpoint on the gateway (the seed's k6 script), or llama-server's
    OpenAI completions (it has no TGI route; ignore_eos keeps every answer at 50 tokens)."""
    if name == PIER_LABEL:
        return f"{server.url}/endpoints/{ENDPOINT}/invocations"
    return f"{server.url}/v1/completions"


def shown_command(pid: int) -> str:
    words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return " ".join(Path(w.decode()).name if w.startswith(b"/") else w.decode() for w in words if w)


def bench_options(args: argparse.Namespace, routes: list[str]) -> BenchOptions:
    """pier bench's closed loop over the servers' routes (the first is the target, a second the comparison)."""
    return BenchOptions(
        target=routes[0],
        compare=routes[1] if len(routes) > 1 else None,
        inference_component=COMPONENT,  # sent on SageMaker routes only
        payload=Api.TGI,
        concurrency=args.levels,
        duration_s=args.duration,
        repeats=1,
        warmup=args.warmup,
        timeout_s=args.timeout,
        input_len=INPUT_LEN,
        output_len=OUTPUT_LEN,
        prompt_format=PromptFormat.TEXT,
        seed=args.seed,
        progress=args.progress,
    )


def rows(result: BenchResult, names: list[str], name: str) -> list[Row]:
    """The rows of server `name` (its place in `names` is its target's in the result); none when it did not run."""
    if name not in names:
        return []
    label = result.targets[names.index(name)].label
    return [
        Row.of(int(run.level.value), run.records, run.metrics.duration_s)
        for run in result.runs
        if run.target.label == label
    ]


def render(args: argparse.Namespace, model: Path, commands: list[str], result: BenchResult, seconds: float) -> str:
    ours, theirs = rows(result, args.servers, PIER_LABEL), rows(result, args.servers, LLAMA_LABEL)
    failed = failure_lines(PIER_LABEL, ours) + failure_lines(LLAMA_LABEL, theirs)
    lines = [
        "# The seeds' crowd: pier vs llama-server",
        "",
        f"- model: {model_shape(model)}; a small synthetic model, so that 500 users take minutes, not hours: this "
        "measures the serving system (queueing, admission, routing, waiting instead of failing), not the kernels",
        f"- machine: {machine()}; OMP_WAIT_POLICY for both: {omp_policy()}",
        f"- pier: a gateway, endpoint `{ENDPOINT}` with inference component `{COMPONENT}` of {COPIES} copies × "
        f"{CPUS_PER_COPY} CPU, {PARALLEL} parallel sequences each, through the SageMaker runtime "
        "(`/endpoints/crowd/invocations`, InferenceComponentName header, TGI payload)",
        f"- llama-server: {COPIES * CPUS_PER_COPY} threads, {COPIES * PARALLEL} slots, OpenAI completions with "
        "ignore_eos",
        f"- load: closed loop (each user sends its next request when its last one ended), {INPUT_LEN}-token prompts "
        f"(text of words that are one token each), {OUTPUT_LEN} output tokens, "
        f"{args.duration:g} s per level (requests running at its end are waited for and counted), client timeout "
        f"{args.timeout:g} s, servers interleaved level by level",
        f"- command: `{shlex.join(['python', *sys.argv])}`; took {seconds / 60:.1f} min"
        + (" (**interrupted**: partial results)" if result.interrupted else ""),
        "",
        "```",
        *commands,
        "```",
        "",
        f"## {PIER_LABEL}",
        "",
        *seed_table(PIER_LABEL, ours),
        "",
        f"## {LLAMA_LABEL}",
        "",
        *seed_table(LLAMA_LABEL, theirs),
        "",
        "## Ratios",
        "",
        *ratio_lines(ours, theirs, (PIER_LABEL, LLAMA_LABEL)),
        "",
        "## Failed requests",
        "",
        *(failed or ["- none"]),
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_peers_dir(parser)
    parser.add_argument("--out", type=Path, required=True, help="the markdown report")
    parser.add_argument("--levels", type=levels, default=DEFAULT_LEVELS,
                        help="concurrent users per level (default %(default)s)")  # fmt: skip
    parser.add_argument("--duration", type=float, default=60.0, help="seconds per level (the seed's k6 ran 90)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before a request counts as failed")
    parser.add_argument("--warmup", type=int, default=4, help="warm-up requests per server, not counted")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--servers", type=servers, default=[PIER_LABEL, LLAMA_LABEL],
                        help="which to run: pier,llama-server (default), or one of them")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="smoke test: --levels 4,16 --duration 10")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    args = parser.parse_args(argv)
    if args.quick:
        args.levels, args.duration = (4, 16), 10.0
    return args


def levels(text: str) -> tuple[int, ...]:
    try:
        return parse_levels(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def allow_open_files(users: int) -> None:
    """Each user holds a connection to the server and, through the gateway, the gateway one to the client; idle
    keep-alive connections to the other server stay open a while too. A soft limit of 1,024 open files (a common
    default) is too few for 500 users, so it is raised towards the hard limit (the servers inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * users + 1024
    if soft >= wanted:
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        raise SystemExit(f"{users} users need about {wanted} open files, and the hard limit is {hard}: raise it "
                         "(`ulimit -Hn`, or LimitNOFILE for a service) or run fewer users (--levels).")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def servers(text: str) -> list[str]:
    names = [name for name in text.replace(" ", "").split(",") if name]
    if not names or any(name not in (PIER_LABEL, LLAMA_LABEL) for name in names) or len(set(names)) < len(names):
        raise argparse.ArgumentTypeError(
            f"--servers takes {PIER_LABEL}, {LLAMA_LABEL} or both, comma-separated; got {text!r}"
        )
    return names


def main() -> None:
    args = parse_args()
    raise_on_sigterm()
    allow_open_files(max(args.levels))
    started = time.monotonic()
    model = crowd_model()
    binary = peer("llama-server", args.peers_dir) if LLAMA_LABEL in args.servers else None
    fleet = Fleet(Path(tempfile.mkdtemp(prefix="pier-crowd-")))
    log(f"logs in {fleet.logs}")
    gateway = Catalog(model, binary).gateway("pier gateway", fleet.logs / "state")
    gateway = replace(gateway, env=gateway_environment(args.timeout, max(args.levels)))
    started_servers = {PIER_LABEL: gateway}
    if binary is not None:
        started_servers[LLAMA_LABEL] = llama_server(binary, model)
    chosen = [started_servers[name] for name in args.servers]
    with running(fleet, chosen):
        commands = []
        if PIER_LABEL in args.servers:
            commands += [gateway.shown(), *deploy(gateway, model, fleet)]
            log(f"{COPIES} copies ready")
        if LLAMA_LABEL in args.servers:
            commands.append(started_servers[LLAMA_LABEL].shown())
        routes = [route(name, started_servers[name]) for name in args.servers]
        log(f"levels {list(args.levels)} users, {args.duration:g} s each")
        console = Console(stderr=True) if args.progress else Console(file=io.StringIO())
        result = run_bench(bench_options(args, routes), console)
    report = render(args, model, commands, result, time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    print(report)


if __name__ == "__main__":
    main()
