"""Where copies run. The control plane decides which copies should exist; a backend makes it so and
reports what is actually running. `local` runs processes on this host; `ray` runs actors on a Ray cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Instance:
    """The instance of a variant a copy is packed into, and how big one instance is. The local backend maps it
    onto this host's cores (already in `CopySpec.cores`); the ray backend reserves it on a node (a placement
    group bundle) and runs every copy packed into it there."""

    variant: str  # whose instances: "<endpoint>/<variant>"
    index: int  # which of the variant's instances
    type: str  # the instance type's name, e.g. "ml.c7g.xlarge"
    vcpus: int  # the size of one instance of that type
    memory_mb: int
    accelerators: int = 0
    owned: tuple[int, ...] = ()  # the instance's vCPUs this copy runs on (all of them when it reserved none)


@dataclass(frozen=True)
class CopySpec:
    """One copy the control plane wants running: one model server process for one model."""

    copy_id: str  # unique and stable across gateway restarts, e.g. "<component>-<n>"
    component: str  # the inference component (or "<endpoint>/<variant>") it serves
    model_dir: Path  # a local folder holding the .gguf or code/inference.py, already fetched
    environment: Mapping[str, str] = field(default_factory=dict)  # the model's Environment block
    cores: tuple[int, ...] = ()  # CPU ids to pin the process to (its threads follow them); () = no pinning
    memory_mb: int = 0  # accounted, not enforced, on the local backend
    accelerators: int = 0  # GPUs it asked for (its instance's); what it got is `gpus`
    # The GPUs it runs on, as CUDA_VISIBLE_DEVICES names them: this host's, handed out by the control plane (the
    # local backend), or those Ray gave its actor (the ray backend fills them in on the node). () = none: CPU.
    gpus: tuple[str, ...] = ()
    cpu_fallback: bool = False  # it asked for GPUs the host lacks and runs on CPU (`pier up --cpu-fallback`)
    instance: Instance | None = None  # None: no variant's capacity behind it (a backend sizes it from the above)
    host: str = "127.0.0.1"  # the address its model server listens on (a Ray node's own address, remotely)


class CopyState(StrEnum):
    STARTING = "Starting"  # launched, /ping not yet 200
    READY = "Ready"  # /ping answers 200: it may take traffic
    RESTARTING = "Restarting"  # died; waiting out its backoff before the next start
    FAILED = "Failed"  # gave up (see message)
    STOPPED = "Stopped"


@dataclass(frozen=True)
class CopyStatus:
    copy_id: str
    component: str
    state: CopyState
    url: str | None = None  # base URL of the copy's model server when it has one, e.g. http://127.0.0.1:41237
    message: str = ""  # why it is not ready, in words a user can act on
    restarts: int = 0
    pid: int | None = None
    # What the gateway sends in X-Pier-Copy-Secret so the copy answers it (pier.channel.copy_secret); None: the
    # copy asks for none. Never shown (repr) nor listed by /pier/copies.
    secret: str | None = field(default=None, repr=False, compare=False)
    # Requests it works on at once (pier.channel.concurrency, from the environment it was started with); the
    # gateway never sends it more. None: its backend does not know, and the gateway assumes the default copy's.
    concurrency: int | None = None
    # The CPU kernels it computes with, in its own words (pier.channel.unservable); None: not said (yet, or on a GPU).
    kernels: str | None = None


@dataclass(frozen=True)
class Capabilities:
    """What the gateway may take for granted about where a backend runs copies (pier.backends.registry)."""

    # Copies are processes on the gateway's host: their processes and memory count in its usage figures.
    local_processes: bool = False
    # The cores copies are numbered against when they do not run on the gateway's host (a cluster's nodes): this
    # host's cores, memory and GPUs then bound none of them. None: copies run on this host's cores.
    host_cores: tuple[int, ...] | None = None


class Backend(Protocol):
    name: str
    capabilities: Capabilities

    async def start(self, spec: CopySpec) -> None:
        """Launch the copy and keep it alive (health-check, restart with backoff) until stopped."""
        ...

    async def stop(self, copy_id: str) -> None:
        """SIGTERM (the copy drains), then SIGKILL after a grace period; forget it."""
        ...

    def statuses(self) -> list[CopyStatus]: ...

    def logs(self, copy_id: str, lines: int = 200) -> str: ...

    def log_file(self, copy_id: str) -> str | None:
        """Where the copy's log is kept on this host, for the other gateways on it (published with the copy while
        this gateway leads); None: nowhere they should read it."""
        ...

    async def logs_elsewhere(self, copy_id: str, lines: int, log_file: str | None) -> str:
        """The end of the log of a copy another gateway owns (this one follows): `log_file` is where the owner
        said it keeps it (None: it said nowhere). Raises KeyError, saying why, when this gateway cannot read it."""
        ...

    async def path_on(self, copy_id: str, path: str) -> str:
        """Where the copy's process reads `path`, a file on the gateway's host (an adapter's GGUF): the path itself
        where the copy sees it; a copy on another machine gets the file first. Raises when it cannot."""
        ...

    async def take_over(self) -> None:
        """This gateway now leads (called before the reconciler's first tick): own every copy already running where
        this backend runs copies, as it is (kept, not restarted, not doubled), so that the reconciler counts it as
        one of its own. Called again while owning: nothing happens."""
        ...

    async def let_go(self) -> None:
        """This gateway stopped leading (its lease lost; not called when it exits: close() is): own no copy any
        more, leaving what another gateway can take over running for the next leader."""
        ...

    async def close(self) -> None:
        """Stop every copy (the gateway is exiting)."""
        ...
