"""One trial: a candidate deployed as a deploy file on a pier gateway, a short `pier bench` through the SageMaker
runtime at the load that fills every copy's parallel sequences, then the endpoint deleted so the next candidate
gets the whole instance. The deploy file is the one the winner is written as, so what was measured is what
`pier deploy` serves.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console

from pier.bench.bench_run import run_bench
from pier.bench.metrics import MS, Metrics
from pier.bench.options import BenchOptions, PromptFormat, WorkloadKind
from pier.client.deploy_file import ComponentBlock, DeployFile, ModelBlock
from pier.client.pier_client import PierClient
from pier.tune.objective import Bound, goodput, misses
from pier.tune.space import Recipe
from pier.tune.trials import Trial

GATEWAY_READY_S = 60.0


class TrialError(RuntimeError):
    """A trial that could not run (the candidate did not deploy); the message says why."""


@dataclass(frozen=True)
class TrialTraffic:
    """What each trial sends: pier bench's workload, lengths, and requests per run."""

    kind: WorkloadKind = WorkloadKind.RANDOM
    input_len: int = 256
    output_len: int = 64
    requests: int = 32
    shared_prefix: int = 0
    turns: int = 4
    # clients at once in every trial; None: as many as the candidate's parallel sequences (copies x parallel), so
    # each layout is driven at what it can hold. Given, every layout serves the same load: the load to be served.
    concurrency: int | None = None

    def describe(self) -> str:
        extra = f", shared prefix {self.shared_prefix}" if self.kind is WorkloadKind.SHARED_PREFIX else ""
        extra += f", {self.turns} turns" if self.kind is WorkloadKind.MULTI_TURN else ""
        load = f", {self.concurrency} clients at once" if self.concurrency else ""
        return (f"{self.kind.value}: {self.input_len} prompt tokens, {self.output_len} output tokens{extra}{load}, "
                f"at least {self.requests} requests per trial")

    def clients(self, candidate: Recipe) -> int:
        """Clients at once in a trial of `candidate`."""
        return self.concurrency or candidate.concurrency


@dataclass(frozen=True)
class Setup:
    """What every candidate shares: the model, where it runs, its KV cells and copies' memory."""

    model: str
    instance_type: str = "local"
    context: int = 4096
    memory_mb: int = 1024

    def deploy_file(self, endpoint: str, candidate: Recipe) -> DeployFile:
        component = ComponentBlock(
            name=component_of(endpoint), copies=candidate.copies, cpus=candidate.threads, memory_mb=self.memory_mb,
            accelerators=candidate.gpus or None, model=ModelBlock(data=self.model,
                                                                  environment=candidate.environment(self.context)))
        return DeployFile(endpoint=endpoint, instance_type=self.instance_type, components=[component])


def component_of(endpoint: str) -> str:
    return f"{endpoint}-copy"


class TrialRunner:
    def __init__(self, gateway: str, setup: Setup, workload: TrialTraffic, bounds: tuple[Bound, ...]) -> None:
        self.client = PierClient(gateway, timeout_s=60.0)
        self.gateway = gateway
        self.setup = setup
        self.workload = workload
        self.bounds = bounds

    def run(self, candidate: Recipe, rung: int) -> Trial:
        started = time.monotonic()
        endpoint = f"tune-{candidate.key}"
        try:
            self.client.deploy(self.setup.deploy_file(endpoint, candidate), Path.cwd(), timeout_s=600.0)
        except Exception as error:
            self._delete(endpoint)
            raise TrialError(f"{candidate.label} did not deploy: {error}") from None
        try:
            metrics = self._bench(endpoint, candidate, rung)
        finally:
            self._delete(endpoint)
        return Trial(candidate, rung, goodput(self.bounds, metrics), metrics.output_throughput,
                     time.monotonic() - started, tuple(misses(self.bounds, metrics)), figures(metrics))

    def _bench(self, endpoint: str, candidate: Recipe, rung: int) -> Metrics:
        w = self.workload
        # SageMaker's OpenAI route for an inference component, on the gateway: routed, admitted and queued as
        # every invocation is, and the chat API every workload (multi-turn too) speaks
        route = f"{self.gateway}/endpoints/{endpoint}/inference-components/{component_of(endpoint)}/openai/v1"
        options = BenchOptions(
            target=route + "/chat/completions",
            concurrency=(w.clients(candidate),), requests=max(w.requests, 2 * w.clients(candidate)),
            warmup=1, workload=w.kind, input_len=w.input_len, output_len=w.output_len,
            shared_prefix=w.shared_prefix, turns=w.turns, prompt_format=PromptFormat.TEXT,
            seed=rung, timeout_s=600.0, progress=False)
        result = run_bench(options, Console(file=io.StringIO()))
        return result.runs[-1].metrics

    def _delete(self, endpoint: str) -> None:
        # nothing deployed, or already gone: the next trial deploys anew either way
        with contextlib.suppress(Exception):
            self.client.delete(endpoint, wait=True, timeout_s=120.0)


def figures(metrics: Metrics) -> dict[str, float]:
    return {"ttft_p50_ms": metrics.ttft.median * MS, "ttft_p90_ms": metrics.ttft.percentiles[90] * MS,
            "tpot_p50_ms": metrics.tpot.median * MS, "tpot_p90_ms": metrics.tpot.percentiles[90] * MS,
            "requests": float(metrics.started), "success_rate": metrics.success_rate}


@contextmanager
def own_gateway(state_dir: Path, port: int, log: Path) -> Iterator[str]:
    """A gateway of its own (`python -m pier.gateway`) for the search, stopped (with its copies) at the end."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "pier.gateway", "--port", str(port), "--host", "127.0.0.1", "--state-dir",
             str(state_dir), "--log-level", "warning"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, url, log)
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + GATEWAY_READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise TrialError(f"the gateway exited ({process.returncode}) before it was ready; see {log}")
        try:
            if httpx.get(url + "/ping", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TrialError(f"the gateway was not ready within {GATEWAY_READY_S:.0f} s; see {log}")
