"""The local backend: each copy is a model-server process on this host.

    python -m pier.server.container --model MODEL_DIR --port PORT --host 127.0.0.1 (threads: its cores)

pinned to its cores, with the model's Environment block, its output in `<state_dir>/copies/<copy_id>/copy.log`,
seeing only the GPUs it holds (CUDA_VISIBLE_DEVICES; PIER_GPUS says how many: pier.backends.process).
Copies of one GGUF share its pages through mmap (llama.cpp's default), so N copies do not cost N times the
weights. Copies die with the gateway (the kernel's parent-death signal), and a gateway that starts again
kills any copy an earlier one left behind, recognised by pid and start time. No other gateway can take a copy
over: one that stops leading (`let_go`, several gateways on one database) stops its copies.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import httpx

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.identities import LOCAL_CAPABILITIES, LOCAL_NAME
from pier.backends.logfile import tail
from pier.backends.supervisor import CopySupervisor, SupervisionSettings

log = logging.getLogger("pier.backends")


class LocalBackend:
    name = LOCAL_NAME
    capabilities = LOCAL_CAPABILITIES

    def __init__(self, state_dir: Path, settings: SupervisionSettings | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.settings = settings or SupervisionSettings()
        self._copies: dict[str, CopySupervisor] = {}
        self._refused: dict[str, CopyStatus] = {}  # specs that cannot run at all, reported as FAILED
        self._client: httpx.AsyncClient | None = None
        self._letting_go: set[asyncio.Task[None]] = set()  # copies stopped in the background by let_go()

    async def start(self, spec: CopySpec) -> None:
        """Launch the copy and keep it alive until stopped. Starting a running copy again with the same
        spec does nothing."""
        running = self._copies.get(spec.copy_id)
        if running is not None:
            if running.spec != spec:
                raise ValueError(f"Copy {spec.copy_id} is already running with another spec; stop it first, or "
                                 "give the new copy another id.")
            return
        self._refused.pop(spec.copy_id, None)
        problem = _unrunnable(spec)
        if problem:
            self._refused[spec.copy_id] = CopyStatus(spec.copy_id, spec.component, CopyState.FAILED, message=problem)
            return
        if spec.cpu_fallback:
            cores = len(spec.cores) or os.cpu_count() or 1
            log.warning("copy %s asks for %d GPU(s) this host lacks; it runs on %d CPU core(s) instead, as "
                        "--cpu-fallback allows", spec.copy_id, spec.accelerators, cores)
        if self._client is None:
            self._client = httpx.AsyncClient(trust_env=False)
        supervisor = CopySupervisor(spec, self._folder(spec.copy_id), self.settings, self._client)
        self._copies[spec.copy_id] = supervisor
        supervisor.start()

    async def stop(self, copy_id: str) -> None:
        """SIGTERM (the copy drains), SIGKILL after the grace period, then forget it. Unknown ids are ignored."""
        self._refused.pop(copy_id, None)
        supervisor = self._copies.pop(copy_id, None)
        if supervisor is not None:
            await supervisor.stop()

    def statuses(self) -> list[CopyStatus]:
        return [s.status() for s in list(self._copies.values())] + list(self._refused.values())  # read off the loop too

    def logs(self, copy_id: str, lines: int = 200) -> str:
        """The end of the copy's log, across its restarts; still there after it stopped."""
        path = self._folder(copy_id) / "copy.log"
        if not path.exists():
            known = ", ".join(sorted(self._copies)) or "none"
            raise KeyError(f"No log for copy {copy_id} under {self.state_dir}; copies running here: {known}.")
        return tail(path, lines)

    def log_file(self, copy_id: str) -> str | None:
        return str(self._folder(copy_id) / "copy.log")

    async def logs_elsewhere(self, copy_id: str, lines: int, log_file: str | None) -> str:
        """The leader's log file of the copy, when this host sees it (a gateway on the leader's host). Only a file
        that is a copy's log is read (`<folder>/copies/<copy_id>/copy.log`): the path comes from the database."""
        path = Path(log_file) if log_file else None
        if path is None or path.parts[-3:] != ("copies", copy_id, "copy.log"):
            raise KeyError(f"The leader did not say where copy {copy_id}'s log is.")
        try:
            return await asyncio.to_thread(tail, path, lines)
        except OSError:
            raise KeyError(f"Copy {copy_id}'s log is on the leader's host, at {path}, which this gateway's host does "
                           "not see.") from None

    async def path_on(self, copy_id: str, path: str) -> str:
        """Copies are processes on this host: they read the gateway's files where they are."""
        return path

    async def take_over(self) -> None:
        """Nothing to take over: a copy here is a child of the gateway that started it, gone with it."""

    async def let_go(self) -> None:
        """Stop every copy, in the background (the gateway no longer leads, and sends them nothing): a copy here is
        this process's child, which no other gateway can keep, and left running it would double the new leader's."""
        supervisors = list(self._copies.values())
        self._copies.clear()
        self._refused.clear()
        for supervisor in supervisors:
            task = asyncio.create_task(supervisor.stop(), name=f"stop {supervisor.spec.copy_id}")
            self._letting_go.add(task)
            task.add_done_callback(self._letting_go.discard)

    async def close(self) -> None:
        """Stop every copy, all at once (the gateway is exiting)."""
        copies = list(self._copies)
        await asyncio.gather(*(self.stop(copy_id) for copy_id in copies), *self._letting_go)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _folder(self, copy_id: str) -> Path:
        if not copy_id or "/" in copy_id or copy_id.startswith("."):
            raise ValueError(f"Copy id {copy_id!r} cannot name a folder; use letters, digits and dashes.")
        return self.state_dir / "copies" / copy_id


def _unrunnable(spec: CopySpec) -> str:
    """Why the copy could never start, so it fails at once instead of after a round of restarts."""
    if not spec.model_dir.exists():
        return f"The model folder {spec.model_dir} does not exist; fetch the model before starting the copy."
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(spec.cores)
    missing = sorted(set(spec.cores) - usable)
    if missing:
        return (f"Cores {missing} are not available to the gateway (it may use {sorted(usable)}); place the copy on "
                "available cores.")
    if spec.accelerators > len(spec.gpus) and not spec.cpu_fallback:
        return (f"The copy asks for {spec.accelerators} GPU(s) and was handed {len(spec.gpus)}; pier never runs it "
                "on CPU unasked. Place it through the gateway (which hands out this host's GPUs), or start the "
                "gateway with `pier up --cpu-fallback` to serve it on CPU.")
    return ""
