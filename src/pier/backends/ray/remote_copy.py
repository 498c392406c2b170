"""What the gateway knows of one copy on the cluster: its spec, secret, state, actor, instance and log."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.ray.actor import CopyReport
from pier.backends.ray.log_mirror import LogMirror


@dataclass
class RemoteCopy:
    spec: CopySpec
    secret: str
    mirror: LogMirror
    state: CopyState = CopyState.STARTING
    message: str = "waiting for its instance"
    url: str | None = None
    pid: int | None = None
    concurrency: int | None = None  # requests the copy takes at once, as its process reports it
    kernels: str | None = None  # its CPU kernels, as its process reports them (pier.channel.unservable)
    restarts: int = 0  # actors that had to be replaced
    process_restarts: int = 0  # restarts of the model server by its current actor
    actor: Any = None
    group: str | None = None
    node_id: str | None = None
    adopted: bool = False
    ready_since: float | None = None
    was_ready: bool = False  # the current actor's copy has been ready at least once
    task: asyncio.Task[None] | None = None

    def status(self) -> CopyStatus:
        alive = self.actor is not None and self.state in (CopyState.STARTING, CopyState.READY)
        return CopyStatus(self.spec.copy_id, self.spec.component, self.state, self.url if alive else None,
                          self.message, self.restarts + self.process_restarts, self.pid if alive else None,
                          secret=self.secret, concurrency=self.concurrency, kernels=self.kernels)

    def set(self, state: CopyState, message: str = "") -> None:
        if state is CopyState.READY and self.state is not CopyState.READY:
            self.ready_since, self.was_ready = time.monotonic(), True
        elif state is not CopyState.READY:
            self.ready_since = None
        self.state, self.message = state, message

    def take(self, report: CopyReport) -> None:
        status = report.status
        self.url, self.pid, self.process_restarts = status.url, status.pid, status.restarts
        self.concurrency = status.concurrency if status.concurrency is not None else self.concurrency
        self.kernels = status.kernels or self.kernels
        self.set(status.state, status.message)
        self.mirror.append(report.log, report.log_offset)
