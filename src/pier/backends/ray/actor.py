"""A copy on a Ray node: a detached actor, named `pier-copy-<copy_id>` in pier's namespace, that gets the model onto
its node, then runs the same model-server process as the local backend (`pier.backends.supervisor`: pinned to its
cores, health-checked, restarted with backoff, killed with the actor through the parent-death signal), listening
on the node's address. The gateway asks it for its status and the new lines of its log.

This module runs on the nodes and imports Ray only there; the class becomes an actor with `ray.remote(CopyActor)`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.logfile import note, tail
from pier.backends.ray.models import Manifest, NodeModels, holds
from pier.backends.ray.placement import instance_of, node_cores
from pier.backends.supervisor import CopySupervisor, SupervisionSettings

log = logging.getLogger("pier.backends.ray")

MAX_LOG_CHUNK = 1024 * 1024
CHECK_S = 0.1  # how often a long poll looks at the copy
LOG_BATCH_S = 1.0  # new log lines wait this long for more before they go to the gateway


@dataclass(frozen=True)
class ActorSetup:
    """What the gateway tells a copy's actor besides its spec."""

    node_dir: str  # where copies keep their files on the node
    settings: SupervisionSettings  # how the process is supervised (its interpreter is the node's own)
    group: str  # the placement group of its instance
    instance_index: int  # its instance's number among pier's instances on the node (which cores it gets)
    transfer: str = "auto"  # "always": copy the model even when the node sees the gateway's folder


@dataclass(frozen=True)
class Identity:
    """Who the actor is, for a gateway that takes it over after a restart."""

    spec: CopySpec  # as the gateway asked for it
    secret: str
    group: str
    node_id: str
    address: str
    log_start: int  # the size of the copy's log on the node when this actor began (earlier actors' lines before)
    pid: int  # the actor's process on its node
    # Its model server runs (started, not stopped); an actor of a pier before this field answers as one that does.
    serving: bool = True
    # The copy as the actor sees it (state, URL, process), so a new leader routes to a ready copy at once rather
    # than after its first report; None from an actor of a pier before this field.
    status: CopyStatus | None = None


Seen = tuple[str, str | None, int, str, int | None]  # what of a status the gateway acts on


def seen(status: CopyStatus) -> Seen:
    return (status.state.value, status.url, status.restarts, status.message, status.pid)


@dataclass(frozen=True)
class CopyReport:
    status: CopyStatus
    log: bytes  # the copy's log from the offset asked for
    log_offset: int  # where the next read starts


class CopyActor:
    def __init__(self, spec: CopySpec, secret: str, setup: ActorSetup) -> None:
        import ray

        self.spec = spec
        self.secret = secret
        self.setup = setup
        self.node_id = ray.get_runtime_context().get_node_id()
        self.address = ray.util.get_node_ip_address()
        self.folder = Path(setup.node_dir) / "copies" / spec.copy_id
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log_path = self.folder / "copy.log"
        self.models = NodeModels(Path(setup.node_dir) / "models")
        self.model_dir: Path | None = None
        self.phase = "getting the model onto its node"
        self.supervisor: CopySupervisor | None = None
        self.stopping = False  # stop() was called: a gateway draining it
        self._client: httpx.AsyncClient | None = None
        self._scratch: dict[str, Path] = {}  # transfers under way, by manifest key
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        # Ray sets OMP_NUM_THREADS=1 for its workers; the model server sizes its own threads from its cores.
        if "OMP_NUM_THREADS" not in spec.environment:
            os.environ.pop("OMP_NUM_THREADS", None)
        self._note(f"copy {spec.copy_id} of {spec.component}: actor on node {self.node_id} ({self.address}), "
                   f"instance group {setup.group}")

    def identity(self) -> Identity:
        serving = self.supervisor is not None and not self.stopping
        return Identity(self.spec, self.secret, self.setup.group, self.node_id, self.address, self.log_start,
                        os.getpid(), serving, self._status())

    # ---- the model

    async def prepare(self, manifest: Manifest) -> bool:
        """True when this node has the model (the gateway's folder, or a copy in the node's cache); False when
        the gateway must send it (`take`, `taken`, then `received`)."""
        where = await self.place(manifest)
        if where is not None:
            self.model_dir = Path(where)
            if where != manifest.folder:
                self._note(f"model {manifest.key[:12]} already on this node in {where}")
            return True
        self.phase = f"receiving the model ({manifest.size / 2**20:.0f} MiB) from the gateway"
        self._note(f"{self.phase} into {self.models.root}")
        return False

    async def received(self, where: str) -> None:
        """The model the gateway sent is complete at `where` on this node (`taken`'s answer)."""
        self.model_dir = Path(where)
        self._note(f"model received into {self.model_dir}")

    # ---- folders of the gateway's on this node (the model's, an adapter's)

    async def place(self, manifest: Manifest) -> str | None:
        """Where this node has the gateway's folder: the gateway's own path when the node sees it (unless
        transfers are forced), or the node's copy of it; None when the gateway must send it (`take`, `taken`)."""
        shared = Path(manifest.folder)
        if self.setup.transfer != "always" and await asyncio.to_thread(holds, shared, manifest):
            return str(shared)
        cached = await asyncio.to_thread(self.models.folder, manifest)
        return None if cached is None else str(cached)

    async def take(self, manifest: Manifest, name: str, offset: int, data: bytes) -> None:
        """One chunk of a folder the gateway sends (each transfer under way writes a scratch folder of its own)."""
        scratch = self._scratch.get(manifest.key)
        if scratch is None:
            scratch = self._scratch[manifest.key] = await asyncio.to_thread(self.models.begin)
        await asyncio.to_thread(self.models.write, scratch, name, offset, data)

    async def taken(self, manifest: Manifest) -> str:
        """The sent folder, complete, moved into the node's cache: its path there."""
        scratch = self._scratch.pop(manifest.key, None)
        if scratch is None:  # an empty folder sends no chunk
            scratch = await asyncio.to_thread(self.models.begin)
        return str(await asyncio.to_thread(self.models.publish, scratch, manifest))

    # ---- the model server

    async def start(self) -> None:
        """Launch the model server under the local backend's supervision, on this node's address and cores."""
        if self.supervisor is not None:
            return
        if self.model_dir is None:
            raise RuntimeError("start() before the model is on this node")
        cores = tuple(sorted(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else ()
        # The GPUs Ray gave this actor (its num_gpus): the model server sees those and no other.
        import ray

        gpus = tuple(str(g) for g in ray.get_gpu_ids())
        spec = dataclasses.replace(self.spec, model_dir=self.model_dir, host=self.address, gpus=gpus,
                                   cores=node_cores(self.setup.instance_index, instance_of(self.spec), cores))
        settings = dataclasses.replace(self.setup.settings, python=sys.executable)
        self._normal_priority()
        self._client = httpx.AsyncClient(trust_env=False)
        self.supervisor = CopySupervisor(spec, self.folder, settings, self._client)
        # The gateway's secret for this copy (it made it, and a new gateway learns it from identity()), not one of
        # the supervisor's own: the process gets it in PIER_COPY_SECRET and answers only requests that carry it.
        self.supervisor.secret = self.secret
        self.supervisor.start()

    async def report(self, log_offset: int, known: Seen | None = None, wait_s: float = 0.0) -> CopyReport:
        """The copy's status and its log from `log_offset`, as soon as the status differs from `known` (what the
        gateway last saw), new log lines have waited `LOG_BATCH_S`, or `wait_s` has passed: a long poll, so the
        gateway hears of a change at once and of nothing, cheaply, while nothing happens. A dead actor fails the
        call at once."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline, lines_due = now + wait_s, now + LOG_BATCH_S
        while True:
            status = self._status()
            now = loop.time()
            if known is None or seen(status) != known or now >= deadline or (
                    now >= lines_due and self._log_size() != log_offset):
                data, offset = self._read_log(log_offset)
                return CopyReport(status, data, offset)
            await asyncio.sleep(CHECK_S)

    def _status(self) -> CopyStatus:
        if self.supervisor is not None:
            return dataclasses.replace(self.supervisor.status(), secret=self.secret)
        return CopyStatus(self.spec.copy_id, self.spec.component, CopyState.STARTING, message=self.phase,
                          secret=self.secret)

    async def stop(self, log_offset: int) -> bytes:
        """Drain and stop the model server (SIGTERM, SIGKILL after the grace period); the log's last lines."""
        self.stopping = True
        if self.supervisor is not None:
            await self.supervisor.stop()
        if self._client is not None:
            await self._client.aclose()
        return self._read_log(log_offset)[0]

    def _normal_priority(self) -> None:
        """Ray starts its workers at a low priority (nice 15, its worker_niceness), which the model server would
        inherit: on a busy node it would get less CPU than the same copy on the local backend. It serves users, so
        it runs at the node's normal priority."""
        try:
            niceness = os.getpriority(os.PRIO_PROCESS, 0)
        except OSError:
            return
        if niceness <= 0:
            return
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
        except OSError as error:
            self._note(f"the model server runs at nice {niceness} like Ray's workers: this node may not raise it "
                       f"({error}). Start the node's Ray with RAY_worker_niceness=0, or give it CAP_SYS_NICE.")

    # ---- its log

    def tail(self, lines: int) -> str:
        """The end of the copy's log on this node (its actors' lines here, across restarts), for a gateway that
        follows: the leader mirrors the log to its own host, a follower asks the actor."""
        try:
            return tail(self.log_path, lines)
        except OSError:
            return ""

    def _log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def _read_log(self, offset: int) -> tuple[bytes, int]:
        try:
            size = self.log_path.stat().st_size
        except OSError:
            return b"", offset
        if size < offset:  # rotated: start again from its beginning
            offset = 0
        with self.log_path.open("rb") as log_file:
            log_file.seek(offset)
            data = log_file.read(MAX_LOG_CHUNK)
        return data, offset + len(data)

    def _note(self, line: str) -> None:
        note(self.log_path, line)
