"""The servers a serving benchmark compares: how each one is started, waited for and stopped.

Every server of a comparison runs on loopback with the same model, threads, KV cells and parallel sequences
(`Catalog`); each process leads its own process group (`Fleet`), so stopping it stops what it started, and Ctrl-C
at the terminal reaches only the benchmark script, which then stops them all.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from common import free_port, log

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


@dataclass(frozen=True)
class Server:
    """One server process the benchmark starts: its command line, environment changes and readiness route."""

    label: str
    argv: tuple[str, ...]
    port: int
    ready_path: str
    env: tuple[tuple[str, str | None], ...] = ()  # changes to the benchmark's environment; None unsets

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
    llama_server: Path | None  # None: no comparison of this run needs llama-server
    threads: int = THREADS
    gpu: bool = False  # every layer on the GPU for both: pier's copy holds one (PIER_GPUS), llama-server -ngl all

    def pier(self, label: str, *, cache: bool, omp: str | bool | None = True, ctx: int = CONTEXT,
             parallel: int = PARALLEL, settings: tuple[tuple[str, str], ...] = ()) -> Server:
        """`omp`: True keeps the benchmark's OMP_WAIT_POLICY; a string sets it; None unsets it. `settings`: more
        of pier's environment settings."""
        env: list[tuple[str, str | None]] = [("MAX_BATCH_TOTAL_TOKENS", str(ctx)), *settings]
        if self.gpu:
            env.append(("PIER_GPUS", "1"))
        if not cache:
            env.append(("PIER_PREFIX_CACHE", "false"))
        if omp is not True:
            env.append(("OMP_WAIT_POLICY", omp if isinstance(omp, str) else None))
        port = free_port()
        argv = (
            sys.executable,
            "-m",
            "pier.server.container",
            "--model",
            str(self.model),
            "--port",
            str(port),
            "--host",
            HOST,
            "--threads",
            str(self.threads),
            "--parallel",
            str(parallel),
        )
        return Server(label, argv, port, "/ping", tuple(env))

    def llama(self, label: str, *, cache: bool, ctx: int = CONTEXT, parallel: int = PARALLEL,
              unified: bool = True) -> Server:
        """`unified`: one KV cache for all slots, as pier's (llama-server's default gives each slot ctx/parallel)."""
        if self.llama_server is None:
            raise ValueError("this catalog has no llama-server")
        port = free_port()
        argv = (
            str(self.llama_server),
            "-m",
            str(self.model),
            "-t",
            str(self.threads),
            "-tb",
            str(self.threads),
            "-c",
            str(ctx),
            "-np",
            str(parallel),
            *(("--kv-unified",) if unified else ()),
            "--host",
            HOST,
            "--port",
            str(port),
        )
        # --no-cache-prompt stops reuse within a slot; --cache-ram 0 also turns off the host-memory prompt cache.
        off = ("--no-cache-prompt", "--cache-ram", "0")
        gpu = ("--n-gpu-layers", "all") if self.gpu else ()
        return Server(label, argv + gpu + (() if cache else off), port, "/health")

    def llama_cpp_python(self, label: str) -> Server:
        port = free_port()
        argv = (
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--n_threads",
            str(THREADS),
            "--n_ctx",
            str(CONTEXT),
            "--interrupt_requests",
            "False",
            "--host",
            HOST,
            "--port",
            str(port),
        )
        return Server(label, argv, port, "/v1/models")

    def gateway(self, label: str, state_dir: Path) -> Server:
        port = free_port()
        argv = (
            sys.executable,
            "-m",
            "pier.gateway",
            "--port",
            str(port),
            "--host",
            HOST,
            "--state-dir",
            str(state_dir),
            "--log-level",
            "warning",
        )
        return Server(label, argv, port, "/ping")


@dataclass
class Fleet:
    """The processes the benchmark started, each the leader of its own process group, so stopping one stops
    whatever it started too, and Ctrl-C at the terminal reaches only the benchmark (which then stops them)."""

    logs: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    extra_pids: list[int] = field(default_factory=list)  # started on our behalf (the gateway's copy)

    def start(self, server: Server) -> None:
        log_file = (self.logs / f"{slug(server.label)}.log").open("ab")
        self.processes[server.label] = subprocess.Popen(
            server.argv,
            env=server.environment(),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log_file.close()

    def wait_ready(self, server: Server) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        process = self.processes[server.label]
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"{server.label} exited ({process.returncode}) before it was ready; see "
                    f"{self.logs / slug(server.label)}.log"
                )
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
    from pier.client.deploy_file import DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    client = PierClient(gateway.url)
    environment = {"MAX_BATCH_TOTAL_TOKENS": str(CONTEXT), "PIER_PARALLEL": str(PARALLEL), "PIER_PREFIX_CACHE": "false"}
    client.deploy(DeployFile(endpoint=ENDPOINT, model=ModelBlock(data=str(model), environment=environment)), Path.cwd())
    copy = client.copies(ENDPOINT)[0]
    fleet.extra_pids.append(int(copy["pid"]))
    cmdline = Path(f"/proc/{copy['pid']}/cmdline").read_bytes().split(b"\0")
    shown = " ".join(Path(w.decode()).name if w.startswith(b"/") else w.decode() for w in cmdline if w)
    return str(copy["url"]).rstrip("/"), f"env {' '.join(f'{k}={v}' for k, v in environment.items())} {shown}"


def completions(server: Server | str) -> str:
    return (server.url if isinstance(server, Server) else server) + "/v1/completions"
