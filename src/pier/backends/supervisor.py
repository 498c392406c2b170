"""Keeping one copy alive: start it, health-check it, restart it with capped exponential backoff when it
dies, give up after repeated failed starts, stop it on request.

    STARTING ──/ping 200──▶ READY ──/ping fails N times──▶ STARTING (no traffic until it answers again)
        │                     │
        └──exits / no 200────┴──exits──▶ RESTARTING ──backoff──▶ STARTING ...   (FAILED after N failed starts)
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.logfile import rotate, tail
from pier.backends.process import CopyProcess, PidFile, describe_exit, environment, free_port, http_url
from pier.channel.concurrency import copy_concurrency, reported_concurrency
from pier.channel.copy_secret import new_copy_secret
from pier.channel.headers import CONCURRENCY_HEADER, KERNELS_HEADER
from pier.channel.unservable import UNSERVABLE_EXIT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SupervisionSettings:
    poll_s: float = 0.2  # how often a starting copy is pinged, and any copy checked for exit
    health_interval_s: float = 2.0  # how often a ready copy is pinged
    ping_timeout_s: float = 2.0  # the container contract: /ping answers within 2 s
    unhealthy_after: int = 3  # failed pings in a row before a ready copy stops taking traffic
    startup_timeout_s: float = 600.0  # SageMaker's container_startup_health_check_timeout default
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    stable_s: float = 60.0  # a copy ready this long starts its next backoff from the beginning
    max_failed_starts: int = 5  # starts in a row that never became ready before the copy is FAILED
    grace_s: float = 30.0  # SIGTERM to SIGKILL, as SageMaker gives a container
    python: str = sys.executable  # the interpreter copies run on


@dataclass(frozen=True)
class _Run:
    """How one start of the process ended."""

    ready_for_s: float | None  # None: never became ready
    why: str
    code: int | None = None  # its exit code (negative: the signal), None when it never ran


# Signals of a process that crashed by itself (a bad instruction, address or operand; an abort): a copy that dies
# of one before it is ready, twice in a row the same way, would die so on every start (its hardware, its model).
CRASH_CODES = frozenset(-s for s in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT))
SAME_CRASHES = 2


def give_up_reason(run: _Run, failed_starts: int, crashes: list[str], max_failed_starts: int) -> str | None:
    """Why supervision of a copy ends after this run, or None to start it again. Pure."""
    if run.ready_for_s is None and run.code == UNSERVABLE_EXIT:
        return f"it cannot run on this host: the process {run.why} saying no CPU kernel family runs its model."
    if len(crashes) >= SAME_CRASHES and len(set(crashes[-SAME_CRASHES:])) == 1:
        return (f"it {crashes[-1]} while loading, {SAME_CRASHES} starts in a row: it would on every start (this "
                "host's CPU or the model file); not started again.")
    if failed_starts >= max_failed_starts:
        return f"gave up after {failed_starts} starts that never became ready; the last one {run.why}."
    return None


class CopySupervisor:
    def __init__(self, spec: CopySpec, folder: Path, settings: SupervisionSettings, client: httpx.AsyncClient
                 ) -> None:
        self.spec = spec
        self.folder = folder
        self.settings = settings
        self._client = client
        self.log_path = folder / "copy.log"
        self._pidfile = PidFile(folder / "pid")
        self.state = CopyState.STARTING
        self.message = "launching"
        self.restarts = 0
        self.url: str | None = None
        self.process: CopyProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self.secret = new_copy_secret()  # the copy answers only requests that carry it (the gateway's)
        self.concurrency = copy_concurrency(environment(spec))  # what the process will take, from what it is given
        self.kernels: str | None = None  # its CPU kernels, as its /ping says (pier.channel.unservable)

    def status(self) -> CopyStatus:
        """The copy as it is now: a process that has just died is reported before supervision notices."""
        state, message = self.state, self.message
        code = self.process.poll() if self.process else None
        if code is not None and state in (CopyState.STARTING, CopyState.READY):
            state, message = CopyState.RESTARTING, f"the process {describe_exit(code)}; restarting"
        alive = self.process is not None and code is None
        pid = self.process.pid if alive and self.process else None
        url = self.url if alive else None
        return CopyStatus(self.spec.copy_id, self.spec.component, state, url, message, self.restarts, pid,
                          concurrency=self.concurrency, secret=self.secret, kernels=self.kernels)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        survivor = self._pidfile.kill_survivor()
        if survivor is not None:
            log.warning("copy %s: killed pid %d left running by an earlier gateway", self.spec.copy_id, survivor)
        self._task = asyncio.create_task(self._supervise(), name=f"copy-{self.spec.copy_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.process is not None and self.process.poll() is None:
            code = await self.process.stop(self.settings.grace_s)
            self._note(f"stopped by pier: the process {describe_exit(code)}")
        self._pidfile.clear()
        self.state, self.message = CopyState.STOPPED, "stopped"

    async def _supervise(self) -> None:
        backoff, failed_starts = self.settings.backoff_initial_s, 0
        crashes: list[str] = []  # how the latest starts in a row crashed before they were ready
        while True:
            run = await self._run_once()
            failed_starts = 0 if run.ready_for_s is not None else failed_starts + 1
            crashes = [*crashes, run.why] if run.ready_for_s is None and run.code in CRASH_CODES else []
            if (reason := give_up_reason(run, failed_starts, crashes, self.settings.max_failed_starts)) is not None:
                self.state = CopyState.FAILED
                self.message = f"{reason} Last log lines:\n{self._log_tail(8)}"
                log.error("copy %s failed: %s", self.spec.copy_id, self.message)
                return
            if run.ready_for_s is not None and run.ready_for_s >= self.settings.stable_s:
                backoff = self.settings.backoff_initial_s
            self.state, self.message = CopyState.RESTARTING, f"the process {run.why}; restarting in {backoff:.0f} s"
            log.warning("copy %s: %s", self.spec.copy_id, self.message)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.settings.backoff_max_s)
            self.restarts += 1

    async def _run_once(self) -> _Run:
        try:
            process = self._launch()
        except OSError as error:  # no interpreter, no log folder: counted as a failed start
            self._note(f"copy {self.spec.copy_id}: the process could not be started ({error})")
            return _Run(None, f"could not be started ({error})")
        try:
            ready_at = await self._until_ready(process)
            if ready_at is None:
                why = await self._end(process, "did not answer GET /ping with 200 within "
                                               f"{self.settings.startup_timeout_s:.0f} s")
                return _Run(None, why, process.poll())
            await self._watch(process)
            why = await self._end(process, "stopped being watched")
            return _Run(time.monotonic() - ready_at, why, process.poll())
        except asyncio.CancelledError:
            raise  # stop() takes the process down
        except Exception as error:  # a bug here must not leave a copy unsupervised
            log.exception("copy %s: supervision failed", self.spec.copy_id)
            return _Run(None, await self._end(process, f"was stopped after a supervision error ({error})"))

    def _launch(self) -> CopyProcess:
        port = free_port(self.spec.host)
        rotate(self.log_path)
        self.url = http_url(self.spec.host, port)
        self._note(f"starting copy {self.spec.copy_id} of {self.spec.component} on port {port}, cores "
                   f"{list(self.spec.cores) or 'any'}, start {self.restarts + 1}")
        self.process = CopyProcess.spawn(self.spec, port, self.log_path, python=self.settings.python,
                                         secret=self.secret)
        self._pidfile.write(self.process.pid)
        self.state, self.message = CopyState.STARTING, "loading the model"
        return self.process

    async def _until_ready(self, process: CopyProcess) -> float | None:
        """When /ping first answered 200, or None if the process exited or ran out of time first."""
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while process.poll() is None and time.monotonic() < deadline:
            if await self.ping():
                self.state, self.message = CopyState.READY, ""
                return time.monotonic()
            await asyncio.sleep(self.settings.poll_s)
        return None

    async def _watch(self, process: CopyProcess) -> None:
        """Until the process exits: a copy that stops answering /ping takes no traffic until it answers."""
        failures, next_ping = 0, time.monotonic() + self.settings.health_interval_s
        while process.poll() is None:
            await asyncio.sleep(self.settings.poll_s)
            if time.monotonic() < next_ping or process.poll() is not None:
                continue
            next_ping = time.monotonic() + self.settings.health_interval_s
            failures = 0 if await self.ping() else failures + 1
            if failures >= self.settings.unhealthy_after and self.state is CopyState.READY:
                self.state = CopyState.STARTING
                self.message = f"not answering GET /ping ({failures} checks in a row); no traffic until it does"
                log.warning("copy %s: %s", self.spec.copy_id, self.message)
            elif failures == 0 and self.state is not CopyState.READY:
                self.state, self.message = CopyState.READY, ""

    async def _end(self, process: CopyProcess, reason_if_alive: str) -> str:
        """Make sure the process is gone; why it ended, in words."""
        code = process.poll()
        if code is None:
            process.kill()
            await process.wait(10.0)
            why = f"{reason_if_alive} and was killed"
        else:
            why = describe_exit(code)
        self._note(f"copy {self.spec.copy_id}: the process {why}")
        return why

    async def ping(self) -> bool:
        """Whether the copy answers /ping with 200 now; a ready copy's word on its concurrency is taken."""
        if self.url is None:
            return False
        try:
            response = await self._client.get(self.url + "/ping", timeout=self.settings.ping_timeout_s)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        self.concurrency = reported_concurrency(response.headers.get(CONCURRENCY_HEADER)) or self.concurrency
        self.kernels = response.headers.get(KERNELS_HEADER) or self.kernels
        return True

    def _note(self, line: str) -> None:
        """pier's own lines in the copy's log, between the process's, so the log tells the whole story."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        with self.log_path.open("a") as out:
            out.write(f"==== pier {stamp}: {line} ====\n")

    def _log_tail(self, lines: int) -> str:
        try:
            return tail(self.log_path, lines)
        except OSError:
            return "(no log)"

