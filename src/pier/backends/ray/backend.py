"""The ray backend: every copy is an actor on a node of a Ray cluster (`pier.backends.ray.actor`), inside the
placement group of its instance (`groups.py`), running the same model-server process as the local backend.

The gateway keeps each copy alive from here: it reserves the instance, starts the actor, sends the model when the
node cannot see it, then keeps one long-poll call open to the actor, which answers when the copy's status changes,
when new log lines have gathered for a second, or after five quiet seconds (the log is mirrored under
`<state_dir>/copies/<copy_id>/copy.log`, so it outlives the copy's node); an actor that dies fails that call at
once. An actor that dies (its
process, or its whole node) is replaced in the same instance, which Ray has placed again on a node with room; the
copy reports RESTARTING meanwhile, as a local copy does, and FAILED with the missing capacity when no node has room.

Actors are detached and named `pier-copy-<copy_id>` in pier's namespace. Connecting to the cluster (`connect()`,
at `pier up`) owns nothing: only the leading gateway owns copies (starts, keeps, stops them, removes instances).
When a gateway starts to lead (`take_over()`: at its start on a state folder; when it takes the lease with
`--state-url`) it takes over the copies running on the cluster as they are (`take_over.py`), before the
reconciler's first tick, which stops the ones no longer wanted; instances no copy uses are removed. A gateway that
loses its lease lets go of them (`let_go()`): its keepers end, its handles are forgotten, the actors and instances
stay for the next leader. Several gateways may so share one cluster (and one namespace): followers never touch an
actor. On its way out the gateway leaves copies running on a cluster that is not its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.identities import RAY_CAPABILITIES, RAY_NAME
from pier.backends.logfile import tail
from pier.backends.ray import control_store
from pier.backends.ray.actor import ActorSetup, CopyReport, Identity, seen
from pier.backends.ray.config import RayConfig
from pier.backends.ray.groups import Groups, live_nodes
from pier.backends.ray.join import Attempts, driver_options, join, probe
from pier.backends.ray.log_mirror import LogMirror
from pier.backends.ray.models import Manifest, manifest_of
from pier.backends.ray.node_files import NodeFiles, actor_of
from pier.backends.ray.placement import Reservation, instance_index, instance_of, missing_capacity, reservation
from pier.backends.ray.ray_calls import (
    RayUnavailable,
    _awaitable,
    _blocking,
    _cancel,
    _death,
    _Gone,
    _import_ray,
    _kill,
    _reset,
    new_actor,
)
from pier.backends.ray.remote_copy import RemoteCopy
from pier.backends.ray.take_over import take_over
from pier.backends.supervisor import SupervisionSettings
from pier.channel.concurrency import copy_concurrency
from pier.channel.copy_secret import new_copy_secret

log = logging.getLogger("pier.backends.ray")

MIB = 2**20
PLACING_S = 2.0  # how long an instance may take to be placed before the copy says which capacity is missing
CALL_S = 15.0  # a call into the cluster's control store that takes longer is given up (the cluster is in trouble)
SHUTDOWN_S = 15.0  # how long leaving a Ray the gateway started may take on the way out


class RayBackend:
    name = RAY_NAME
    capabilities = RAY_CAPABILITIES  # copies numbered against a cluster's cores, not the gateway's

    def __init__(self, state_dir: Path, config: RayConfig | None = None, settings: SupervisionSettings | None = None,
                 *, report_s: float = 0.5, long_poll_s: float = 5.0) -> None:
        self.state_dir = Path(state_dir)
        self.config = config or RayConfig()
        self.settings = settings or SupervisionSettings()
        self.report_s = report_s  # how soon an actor that did not answer is asked again
        self.long_poll_s = long_poll_s  # how long an actor holds a report back while nothing changes
        self._copies: dict[str, RemoteCopy] = {}
        self._groups = Groups()
        self._connected = False
        self._initialized_here = False
        self._owning = False  # between take_over() and let_go() (or close()): this gateway leads
        self._stops: set[asyncio.Task[Any]] = set()  # stop() calls under way, cancelled by let_go()
        self._files = NodeFiles(self.settings.startup_timeout_s)  # the gateway's files on the nodes
        self._lock = threading.Lock()

    # ---- the cluster

    def connect(self) -> None:
        """Join the cluster (or start pier's own Ray on this host); its copies stay whoever's they are until
        take_over(). Blocking, and done once: `pier up` calls it before it serves, take_over() or start() otherwise."""
        with self._lock:
            if self._connected:
                return
            ray = _import_ray()
            if ray.is_initialized():  # this process already joined a cluster (tests, or an embedding program)
                namespace = ray.get_runtime_context().namespace
                if namespace != self.config.namespace:
                    wanted = self.config.namespace
                    raise RayUnavailable(f"This process is connected to Ray in namespace {namespace!r}, not "
                                         f"{wanted!r}: connect with namespace={wanted!r}.")
            else:
                self._init(ray)
            self._connected = True

    def _init(self, ray: Any) -> None:
        options = driver_options(self.config)
        if self.config.own_cluster:
            log.info("starting a Ray of pier's own on this host (pier up --ray-address joins an existing one)")
            self._start(lambda: ray.init(address="local", include_dashboard=False, **options))
            return
        log.info("joining the Ray cluster at %s (namespace %s)", self.config.address, self.config.namespace)
        address, attempts = str(self.config.address), Attempts(self.config.join_wait_s)

        def attempt() -> None:
            probe(address)
            ray.init(address=address, **options)

        self._start(lambda: join(attempt, _reset(ray), address, attempts))

    def _start(self, connect: Callable[[], None]) -> None:
        try:
            connect()
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise RayUnavailable(f"Cannot join the Ray cluster at {self.config.address}: {error}. Check the address "
                                 "(auto, host:6379 or ray://host:10001) and that this host runs the cluster's Ray "
                                 "version.") from None
        self._initialized_here = True

    async def _ensure_connected(self) -> None:
        if not self._connected:
            await _blocking(self.connect)

    # ---- leading: which copies are this gateway's

    async def take_over(self) -> None:
        """Own every copy actor in the namespace as it is, and keep each from now on; remove the instances none of
        them uses (`take_over.py` says which actors are killed instead, and why). Only the leader calls it, once
        the gateway before it has stopped leading: a follower never touches an actor, so it cannot harm one the
        leader is still creating."""
        await self._ensure_connected()
        if self._owning:
            return
        stopped = threading.Event()  # set if this is cancelled: the take-over's thread then kills nothing more
        groups = self._groups if self._copies else Groups()  # copies started before (tests) keep their instances
        try:
            adopted = await _blocking(partial(take_over, groups, self._folder, stopped.is_set))
        except BaseException:
            stopped.set()
            raise
        self._groups, self._owning = groups, True
        for copy in adopted:
            if copy.spec.copy_id in self._copies:  # started meanwhile (a test's start() before it): that one stays
                continue
            self._copies[copy.spec.copy_id] = copy
            copy.task = asyncio.create_task(self._keep(copy), name=f"ray-copy-{copy.spec.copy_id}")

    async def let_go(self) -> None:
        """Own nothing any more, stopping nothing: the keepers and stops under way are cancelled and the handles
        forgotten; the actors and their instances stay on the cluster for the next leader to take over."""
        self._owning = False
        copies, stops = list(self._copies.values()), list(self._stops)
        self._copies.clear()
        self._files = NodeFiles(self.settings.startup_timeout_s)
        self._groups = Groups()  # a fresh one: a call still running on a thread holds the old one, never this
        for task in stops:
            task.cancel()
        await asyncio.gather(*(_cancel(copy.task) for copy in copies), *stops, return_exceptions=True)
        if copies:
            log.info("no longer leading: %d copies left on the cluster for the next leader", len(copies))

    # ---- the Backend protocol

    async def start(self, spec: CopySpec) -> None:
        """Run the copy on the cluster and keep it there until stopped. Starting a running copy again with the
        same spec does nothing."""
        await self._ensure_connected()
        running = self._copies.get(spec.copy_id)
        if running is not None:
            if running.spec != spec and not running.adopted:
                raise ValueError(f"Copy {spec.copy_id} is already running with another spec; stop it first, or "
                                 "give the new copy another id.")
            return
        copy = RemoteCopy(spec, new_copy_secret(), LogMirror(self._folder(spec.copy_id)),
                          concurrency=copy_concurrency(spec.environment))
        self._copies[spec.copy_id] = copy
        copy.task = asyncio.create_task(self._keep(copy), name=f"ray-copy-{spec.copy_id}")

    async def stop(self, copy_id: str) -> None:
        """Drain the copy (SIGTERM, SIGKILL after the grace period), end its actor, release its instance if no
        other copy uses it, and forget it. Unknown ids are ignored."""
        copy = self._copies.pop(copy_id, None)
        if copy is None:
            return
        groups, me = self._groups, asyncio.current_task()
        if me is None:  # not in a task: nothing for let_go() to cancel
            await self._stop(copy, groups)
            return
        self._stops.add(me)
        try:
            await self._stop(copy, groups)
        finally:
            self._stops.discard(me)

    async def _stop(self, copy: RemoteCopy, groups: Groups) -> None:
        copy_id = copy.spec.copy_id
        await _cancel(copy.task)
        actor, copy.actor = copy.actor, None
        if actor is not None:
            try:
                rest = await asyncio.wait_for(_awaitable(actor.stop.remote(copy.mirror.offset)),
                                              self.settings.grace_s + 10)
                copy.mirror.append(rest, copy.mirror.offset + len(rest))
            except Exception as error:  # its node is gone, or it does not answer: it is killed all the same
                copy.mirror.note(f"its actor could not drain the copy ({type(error).__name__})")
        try:
            if actor is not None:
                await _blocking(partial(_kill, actor), CALL_S)
            if copy.group is not None:
                await _blocking(partial(groups.release, copy_id, copy.group), CALL_S)
        except TimeoutError:  # the cluster does not answer (it may be going down with the gateway)
            log.warning("copy %s: the Ray cluster did not answer within %.0f s; its actor and instance may be left "
                        "for the next gateway to sweep", copy_id, CALL_S)
        copy.set(CopyState.STOPPED, "stopped")
        copy.mirror.note("stopped by pier")

    def statuses(self) -> list[CopyStatus]:
        return [copy.status() for copy in list(self._copies.values())]  # read off the loop too

    def logs(self, copy_id: str, lines: int = 200) -> str:
        """The end of the copy's log as mirrored on the gateway, across its restarts and nodes."""
        path = self._folder(copy_id) / "copy.log"
        if not path.exists():
            known = ", ".join(sorted(self._copies)) or "none"
            raise KeyError(f"No log for copy {copy_id} under {self.state_dir}; copies running here: {known}.")
        return tail(path, lines)

    def log_file(self, copy_id: str) -> str | None:
        """None: a follower reads the copy's log from its actor (`logs_elsewhere`), wherever the follower runs."""
        return None

    async def logs_elsewhere(self, copy_id: str, lines: int, log_file: str | None) -> str:
        """The end of the copy's log on its node, from its actor found by its name on the cluster (this gateway
        owns no copy: it follows)."""
        await self._ensure_connected()
        from ray.exceptions import RayError

        try:
            actor, _ = await actor_of(copy_id, CALL_S)
            text: str = await asyncio.wait_for(_awaitable(actor.tail.remote(lines)), CALL_S)
        except RayUnavailable as error:
            raise KeyError(f"No log for copy {copy_id}: {error}.") from None
        except (TimeoutError, AttributeError, RayError) as error:  # AttributeError: an actor of a pier before tail()
            raise KeyError(f"Copy {copy_id}'s actor did not give its log ({type(error).__name__}); read it through "
                           "the leader.") from None
        return text

    async def close(self) -> None:
        """The gateway is exiting: leave the copies running for the next gateway on a cluster that is not pier's
        own (`keep_copies`), else stop them all; then leave the cluster."""
        if self.config.keeps_copies(started_ray=self._initialized_here and self.config.own_cluster):
            copies = list(self._copies.values())
            await asyncio.gather(*(_cancel(copy.task) for copy in copies))
            if copies:
                log.info("leaving %d copies on the cluster for the next gateway", len(copies))
            self._copies.clear()
        else:
            await asyncio.gather(*(self.stop(copy_id) for copy_id in list(self._copies)))
        self._owning = False
        if self._initialized_here:
            import ray

            with contextlib.suppress(TimeoutError):
                await _blocking(ray.shutdown, SHUTDOWN_S)
            self._initialized_here = False
        self._connected = False

    def node_of(self, copy_id: str) -> str | None:
        """The node the copy's actor runs on (None while it has none)."""
        copy = self._copies.get(copy_id)
        return copy.node_id if copy is not None and copy.actor is not None else None

    # ---- keeping one copy alive

    async def _keep(self, copy: RemoteCopy) -> None:
        backoff, failures = self.settings.backoff_initial_s, 0
        while True:
            placing = copy.actor is None
            try:
                if placing:
                    await control_store.until_answers(copy, max(self.report_s, 1.0), CALL_S)
                    await self._place(copy)
                why = await self._watch(copy)
            except asyncio.CancelledError:
                raise
            except _Gone as gone:
                why = str(gone)
            except Exception as error:
                if placing and not await control_store.answers(CALL_S):
                    await self._discard(copy)  # the head went away while placing it: not the copy's failure
                    continue
                log.exception("copy %s: keeping it on Ray failed", copy.spec.copy_id)  # a bug must not stop it
                why = _death(error)
            stable = copy.ready_since is not None and time.monotonic() - copy.ready_since >= self.settings.stable_s
            failures = 0 if copy.was_ready else failures + 1
            await self._discard(copy)
            if failures >= self.settings.max_failed_starts:
                copy.set(CopyState.FAILED, f"gave up after {failures} starts on the cluster that never became ready; "
                                           f"the last one: {why}")
                copy.mirror.note(copy.message)
                log.error("copy %s failed: %s", copy.spec.copy_id, copy.message)
                return
            if stable:
                backoff = self.settings.backoff_initial_s
            copy.set(CopyState.RESTARTING, f"{why}; starting it again in {backoff:.0f} s")
            copy.mirror.note(copy.message)
            log.warning("copy %s: %s", copy.spec.copy_id, copy.message)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.settings.backoff_max_s)
            copy.restarts += 1

    async def _place(self, copy: RemoteCopy) -> None:
        """Reserve the copy's instance, start its actor there, get the model onto the node, start the server."""
        spec, instance = copy.spec, instance_of(copy.spec)
        wanted = reservation(spec, self.config)
        copy.group, copy.was_ready = wanted.group, False
        copy.set(CopyState.STARTING, f"reserving its instance ({wanted.describe()})")
        handle = await _blocking(partial(self._groups.acquire, spec.copy_id, wanted, instance.variant), CALL_S)
        node = await self._until_placed(copy, handle, wanted)
        index = instance_index(wanted.group, node, await _blocking(self._groups.placed, CALL_S))
        setup = ActorSetup(self.config.node_dir, self.settings, wanted.group, index, self.config.model_transfer)
        copy.set(CopyState.STARTING, f"starting its Ray actor on node {node}")
        copy.actor = await _blocking(partial(new_actor, copy, setup, handle, wanted.bundle, self.config), CALL_S)
        identity: Identity = await self._call(copy.actor.identity.remote(), self.settings.startup_timeout_s)
        copy.node_id = identity.node_id
        copy.mirror.append(b"", identity.log_start)  # the node's log from here on: the actor's first line
        manifest = await asyncio.to_thread(manifest_of, spec.model_dir)
        if not await self._call(copy.actor.prepare.remote(manifest), self.settings.startup_timeout_s):
            await self._send_model(copy, manifest)
        await self._call(copy.actor.start.remote(), self.settings.startup_timeout_s)

    async def _until_placed(self, copy: RemoteCopy, handle: Any, wanted: Reservation) -> str:
        """The node holding the instance, once Ray has placed it; until then the copy says what capacity is
        missing (FAILED after `capacity_wait_s`, which is how the endpoint learns it; it keeps waiting)."""
        since = time.monotonic()
        while True:
            node = await _blocking(partial(self._groups.node_of, handle), CALL_S)
            if node is not None:
                return node
            if await _blocking(partial(self._groups.state, handle), CALL_S) == "REMOVED":
                raise _Gone(f"its instance {wanted.group} was removed from the cluster")
            if time.monotonic() - since < PLACING_S:  # Ray usually places a group within milliseconds
                await asyncio.sleep(0.1)
                continue
            why = missing_capacity(wanted, await _blocking(live_nodes, CALL_S), instance_of(copy.spec))
            late = time.monotonic() - since >= self.config.capacity_wait_s
            if (copy.state, copy.message) != (CopyState.FAILED if late else CopyState.STARTING, why):
                copy.mirror.note(why)
            copy.set(CopyState.FAILED if late else CopyState.STARTING, why)
            await asyncio.sleep(max(self.report_s, 0.5))

    async def _send_model(self, copy: RemoteCopy, manifest: Manifest) -> None:
        """The model's files into the node's cache (the copy says how far it got)."""
        def progress(sent: int, total: int) -> None:
            copy.set(CopyState.STARTING, f"copying the model to node {copy.node_id}: {sent / MIB:.0f} of "
                                         f"{total / MIB:.0f} MiB")

        where = await self._files.send(copy.actor, manifest, progress)
        await self._call(copy.actor.received.remote(where), self.settings.startup_timeout_s)

    # ---- files of the gateway's that a copy reads (an adapter's GGUF)

    async def path_on(self, copy_id: str, path: str) -> str:
        """Where the copy reads `path`, a file on the gateway's host (node_files.py). A follower owns no copy: it
        finds the leader's copy's actor by its name on the cluster."""
        copy = self._copies.get(copy_id)
        if copy is not None and copy.actor is not None and copy.node_id is not None:
            actor, node_id = copy.actor, copy.node_id
        elif self._owning:
            raise RayUnavailable(f"copy {copy_id} has no actor on a node now")
        else:
            await self._ensure_connected()
            actor, node_id = await actor_of(copy_id, CALL_S)
        return await self._files.path_on(actor, node_id, path, copy_id)

    async def _watch(self, copy: RemoteCopy) -> str:
        """Take the actor's reports until it dies; why it died. An actor that stops answering (its node may be
        unreachable) takes no traffic until it answers again."""
        from ray.exceptions import ActorUnavailableError, RayActorError

        misses, known = 0, None
        while True:
            try:
                ref = copy.actor.report.remote(copy.mirror.offset, known, self.long_poll_s)
                report: CopyReport = await self._call(ref, self.long_poll_s + self.settings.ping_timeout_s)
            except TimeoutError:  # silent past its long poll: its node may be cut off
                misses = max(misses + 1, self.settings.unhealthy_after)
            except ActorUnavailableError:  # refused at once: its node may be going down
                misses += 1
            except RayActorError as error:
                return _death(error)
            else:
                misses, known = 0, seen(report.status)
                copy.take(report)
                if report.status.state is CopyState.STOPPED:  # stopped by a gateway that led before this one
                    raise _Gone("its model server was stopped by another gateway")
                continue
            if misses >= self.settings.unhealthy_after and copy.state is CopyState.READY:
                copy.set(CopyState.STARTING, f"its Ray actor on node {copy.node_id} does not answer; no traffic "
                                             "until it does")
                log.warning("copy %s: %s", copy.spec.copy_id, copy.message)
            known = None  # the next answer comes at once
            await asyncio.sleep(self.report_s)

    async def _discard(self, copy: RemoteCopy) -> None:
        actor, copy.actor = copy.actor, None
        copy.url = copy.pid = None
        copy.ready_since = None
        if actor is not None:
            with contextlib.suppress(TimeoutError):  # the head is away: the next start replaces it by its name
                await _blocking(partial(_kill, actor), CALL_S)

    @staticmethod
    async def _call(ref: Any, timeout_s: float) -> Any:
        return await asyncio.wait_for(_awaitable(ref), timeout_s)

    def _folder(self, copy_id: str) -> Path:
        if not copy_id or "/" in copy_id or copy_id.startswith("."):
            raise ValueError(f"Copy id {copy_id!r} cannot name a folder; use letters, digits and dashes.")
        return self.state_dir / "copies" / copy_id
