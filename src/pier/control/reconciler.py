"""Desired copies (from the state) against the backend's copies: start what is missing, stop what is no
longer wanted, and move each endpoint's and component's status as SageMaker moves it.

`plan()` and `next_status()` are the decisions, pure and table-tested; `Reconciler` gathers their inputs
each tick (state, fetches, backend statuses) and applies the plan without ever waiting on a copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pier.backends.base import Backend, CopySpec, CopyState, CopyStatus
from pier.control import adapters
from pier.control.capacity import CopyCap, Placement, host_copy_cap
from pier.control.deployer import AlarmState, Deployer
from pier.control.desired import Desired, desired_copies
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.source import ModelSource, source_of
from pier.control.gpu_pool import GpuPool
from pier.control.instance_types import InstanceType, host_cores, lookup
from pier.control.records import ComponentRecord, EndpointRecord
from pier.control.resource_store import ResourceStore
from pier.control.workload import Workload
from pier.gpus import discover
from pier.state_folder.rows import BadRow

log = logging.getLogger("pier.control")

TICK_S = 1.0


@dataclass(frozen=True)
class Plan:
    start: tuple[CopySpec, ...] = ()
    stop: tuple[str, ...] = ()


def plan(desired: Sequence[CopySpec], actual: Sequence[CopyStatus]) -> Plan:
    """Start desired copies the backend does not run; stop running copies nobody wants, except that a
    workload's old ready copies keep serving until every one of its desired copies is ready (an update
    rolls, it never leaves the workload with nothing to answer)."""
    running = {c.copy_id: c for c in actual if c.state is not CopyState.STOPPED}
    wanted = {s.copy_id for s in desired}
    start = tuple(s for s in desired if s.copy_id not in running)
    settled = _settled(desired, running)
    stop = tuple(
        c.copy_id for c in running.values()
        if c.copy_id not in wanted and (c.component in settled or c.state is not CopyState.READY)
    )
    return Plan(start, stop)


def _settled(desired: Sequence[CopySpec], running: dict[str, CopyStatus]) -> set[str]:
    """Workloads whose desired copies are all ready, and workloads nothing is desired of any more."""
    components = {c.component for c in running.values()} | {s.component for s in desired}
    unready = {s.component for s in desired
               if s.copy_id not in running or running[s.copy_id].state is not CopyState.READY}
    return components - unready


@dataclass(frozen=True)
class Progress:
    """How far a workload (a component, or all of a classic endpoint's variants) has come."""

    desired: int  # copies wanted
    proven: int  # of those, copies that have been ready at least once
    problem: str = ""  # why it cannot get there: a fetch failed, capacity is short, a copy gave up
    step: str = ""  # what it waits on meanwhile, shown as its reason: a checkpoint being converted


def next_status(current: str, progress: Progress) -> tuple[str, str]:
    """(status, failure reason). InService stays InService while copies come and go (a dead copy being
    restarted does not take the endpoint out of service); Creating and Updating end in InService once every
    desired copy has been ready, or in Failed when something stands in the way; Failed heals the same way."""
    if current in ("InService", "Deleting"):
        return current, ""
    if progress.problem:
        return "Failed", progress.problem
    if progress.proven >= progress.desired:
        return "InService", ""
    return current, progress.step


class Reconciler:
    def __init__(self, state: ResourceStore, backend: Backend, fetches: Fetches, *, tick_s: float = TICK_S,
                 host: tuple[int, ...] | None = None, instance_type: Callable[[str], InstanceType] = lookup,
                 clock: Callable[[], float] = time.time, copy_cap: CopyCap | None = None,
                 gpus: GpuPool | None = None, alarm_state: AlarmState | None = None,
                 extra: Callable[[], list[EndpointRecord]] = list) -> None:
        self.state = state
        self.backend = backend
        self.fetches = fetches
        self.tick_s = tick_s
        self.host = host or host_cores()
        self.instance_type = instance_type
        self.clock = clock
        self.copy_cap = copy_cap or host_copy_cap()
        self.gpus = gpus or GpuPool(discover())  # this host's GPUs, handed to copies (pier.control.gpu_pool)
        self._wake = asyncio.Event()
        fetches.notify = self._wake.set  # a finished download is worth acting on at once
        self._placements: tuple[Placement, ...] = ()
        self._problems: dict[Workload, str] = {}  # the last tick's placement problems (Desired.problems)
        self._specs: dict[str, CopySpec] = {}  # the copies last asked for, by id: where each one is placed
        self._proven: set[str] = set()
        self._busy: dict[str, asyncio.Task[None]] = {}  # copy id -> its start or stop in progress
        self._steps: dict[Workload, str] = {}  # workloads waiting on a conversion, with the step it is at
        self._stopping: set[str] = set()  # copies told to stop, draining what they have
        self._skipped: set[tuple[str, str, str]] = set()  # unreadable records already logged
        self.deployer = Deployer(state, clock, alarm_state)  # endpoint updates, rolled back on their alarms
        # Endpoints no user made, whose copies are wanted too (a transform job's, control/extra.py); their status is
        # their owner's.
        self.extra = extra
        # Writes the copies as the router sees them where other gateways route by them (gateway/copy_board.py):
        # called before each tick's statuses, so no status or deployment step that sends traffic to a copy is
        # stored before the copy is published ready.
        self.publish: Callable[[], Awaitable[None]] | None = None

    def wake(self, *, retry_fetches: bool = False) -> None:
        """Reconcile now (the state changed); `retry_fetches` lets failed model fetches run again."""
        if retry_fetches:
            self.fetches.forget_failures()
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()  # before the tick: a change made during it wakes the next one at once
            try:
                await self.tick()
            except Exception:
                log.exception("reconcile failed; trying again in %.1f s", self.tick_s)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.tick_s)

    async def tick(self) -> None:
        fetch_problems = self._resolve_models()
        endpoints, bad_endpoints = self.state.endpoints.scan()
        components, bad_components = self.state.components.scan()
        untouchable = self._skip_unreadable(bad_endpoints + bad_components, components)
        actual = self.backend.statuses()
        running = {c.copy_id for c in actual if c.state not in (CopyState.STOPPED, CopyState.FAILED)}
        failed = {c.copy_id for c in actual if c.state is CopyState.FAILED}
        desired = desired_copies(endpoints + self.extra(), components, self._placements, self.host, self.instance_type,
                                 self.copy_cap, running, failed, self.gpus)
        self._placements = desired.placements
        self._problems = desired.problems
        self._specs = {spec.copy_id: spec for spec in desired.specs}
        self._proven = {c.copy_id for c in actual if c.state is CopyState.READY} | (
            self._proven & {c.copy_id for c in actual})
        todo = plan(desired.specs, actual)
        self._apply(Plan(todo.start, tuple(c for c in todo.stop if not untouchable(_workload_of(c, actual)))))
        if self.publish is not None:
            await self.publish()
        self._update_statuses(endpoints, components, desired, actual, fetch_problems)
        self._finish_deletes(endpoints, components, actual)

    def copies(self, workload: Workload) -> list[CopyStatus]:
        """The copies serving `workload`, as the router sees them (a backend labels each copy with it). A copy
        being stopped (scaled in, replaced) is draining: it finishes its requests but is sent no new ones, so it
        is not shown ready."""
        return [dataclasses.replace(c, state=CopyState.STARTING, message="draining: stopped by pier")
                if c.copy_id in self._stopping and c.state is CopyState.READY else c
                for c in self.backend.statuses() if c.component == workload]

    def placement_problem(self, workload: Workload) -> str | None:
        """Why some of `workload`'s copies could not be placed at the last tick (None: all were); for workloads
        with no stored status to carry it (a transform job's)."""
        return self._problems.get(workload)

    def spec(self, copy_id: str) -> CopySpec | None:
        """What the copy was asked to be (its instance and cores), as of the last tick; None: not wanted now."""
        return self._specs.get(copy_id)

    async def close(self) -> None:
        self.fetches.close()
        await asyncio.gather(*self._busy.values(), return_exceptions=True)

    def _skip_unreadable(self, rows: list[BadRow], components: list[ComponentRecord]) -> Callable[[str], bool]:
        """Log each unreadable record once, and say which workloads are theirs (with the components hosted on an
        unreadable endpoint): what they want cannot be read, so their copies are neither started nor stopped
        until the record is deleted (or restored)."""
        for row in rows:
            if (row.kind, row.name, row.reason) not in self._skipped:
                log.warning("skipping %s %s: %s", row.kind, row.name, row.failure_reason)
        self._skipped = {(row.kind, row.name, row.reason) for row in rows}
        endpoints = {row.name.lower() for row in rows if row.kind == "endpoint"}
        skipped = {row.name.lower() for row in rows if row.kind == "inference component"}
        skipped |= {c.name.lower() for c in components if c.endpoint.lower() in endpoints}
        return lambda workload: (workload.lower() in skipped
                                 or ("/" in workload and workload.partition("/")[0].lower() in endpoints))

    # ---- models

    def _resolve_models(self) -> dict[Workload, str]:
        """Record where each endpoint's and component's model files are, once fetched; return the workloads
        whose fetch failed, with why."""
        problems: dict[Workload, str] = {}
        self._steps.clear()
        for endpoint in self.state.endpoints.all():
            if endpoint.status != "Deleting":
                problems |= self._resolve_endpoint(endpoint)
        for component in self.state.components.all():
            if component.status == "Deleting" or (component.model_dir and component.weights_mb is not None
                                                  and Path(component.model_dir).is_dir()):
                continue
            fetched = self.fetches.get(component_source(component))
            if fetched.folder is not None:
                self.state.components.replace(component, component.model_copy(
                    update={"model_dir": str(fetched.folder), "weights_mb": fetched.weights_mb}))
            elif fetched.error:
                problems[Workload.of_component(component.name)] = fetched.error
            elif fetched.progress:
                self._steps[Workload.of_component(component.name)] = fetched.progress
        return problems

    def _resolve_endpoint(self, endpoint: EndpointRecord) -> dict[Workload, str]:
        problems: dict[Workload, str] = {}
        variants = list(endpoint.fleet_variants)
        for i, variant in enumerate(variants):
            if variant.container is None or (variant.model_dir and Path(variant.model_dir).is_dir()):
                continue
            fetched = self.fetches.get(source_of(variant.container))
            if fetched.folder is not None:
                variants[i] = variant.model_copy(update={"model_dir": str(fetched.folder)})
            elif fetched.error:
                problems[variant.workload(endpoint.name)] = fetched.error
            elif fetched.progress:
                self._steps[variant.workload(endpoint.name)] = fetched.progress
        if tuple(variants) != endpoint.fleet_variants:
            own, pending = variants[: len(endpoint.variants)], variants[len(endpoint.variants):]
            change: dict[str, Any] = {"variants": tuple(own)}
            if endpoint.deployment is not None:
                change["deployment"] = endpoint.deployment.model_copy(update={"variants": tuple(pending)})
            self.state.endpoints.replace(endpoint, endpoint.model_copy(update=change))
        return problems

    # ---- copies

    def _apply(self, todo: Plan) -> None:
        for spec in todo.start:
            self._run(spec.copy_id, partial(self.backend.start, spec), f"start {spec.copy_id} on {_where(spec)}")
        for copy_id in todo.stop:
            if copy_id not in self._busy:
                self._stopping.add(copy_id)
            self._run(copy_id, partial(self.backend.stop, copy_id), f"stop {copy_id}")

    def _run(self, copy_id: str, action: Callable[[], Coroutine[Any, Any, None]], what: str) -> None:
        """One start or stop at a time per copy, in the background (a stop waits out the copy's drain)."""
        if copy_id in self._busy:
            return
        log.info("%s", what)
        task = asyncio.ensure_future(action())
        self._busy[copy_id] = task
        task.add_done_callback(lambda done: self._done(copy_id, what, done))

    def _done(self, copy_id: str, what: str, task: asyncio.Future[None]) -> None:
        self._busy.pop(copy_id, None)
        self._stopping.discard(copy_id)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not %s: %s", what, task.exception())
        self._wake.set()

    # ---- statuses

    def _update_statuses(self, endpoints: Iterable[EndpointRecord], components: Iterable[ComponentRecord],
                         desired: Desired, actual: Sequence[CopyStatus], fetch_problems: dict[Workload, str]) -> None:
        problems = {**desired.problems, **fetch_problems, **_gave_up(desired.specs, actual)}
        components = list(components)
        by_name = {c.name.lower(): c for c in components}
        for component in components:
            progress = self._progress([Workload.of_component(component.name)], component.copies, desired, problems)
            if adapters.is_adapter(component) and not progress.problem:
                ready, problem = adapters.readiness(component, by_name.get(adapters.base_name(component).lower()))
                progress = Progress(1, int(ready), problem)
            if component.rollout is not None and component.status == "Updating":
                self.deployer.roll(component, progress.proven >= progress.desired, progress.problem)
                continue
            status, reason = next_status(component.status, progress)
            if status == component.status == "InService":
                reason = component.failure_reason  # why its last rolling update rolled back
            if (status, reason) != (component.status, component.failure_reason) and component.status != "Deleting":
                self._log_status("inference component", component.name, status, reason)
                self.state.components.replace(component, component.model_copy(
                    update={"status": status, "failure_reason": reason, "modified": self.clock()}))
        for endpoint in endpoints:
            if endpoint.deployment is not None and endpoint.status == "Updating":
                green = endpoint.deployment.variants
                progress = self._progress([v.workload(endpoint.name) for v in green if v.model],
                                          sum(v.instance_count for v in green if v.model), desired, problems)
                self.deployer.drive(endpoint, progress.proven >= progress.desired, progress.problem)
                continue
            workloads = [v.workload(endpoint.name) for v in endpoint.variants if v.model]
            wanted = sum(v.instance_count for v in endpoint.variants if v.model)
            status, reason = next_status(endpoint.status, self._progress(workloads, wanted, desired, problems))
            if status == endpoint.status == "InService":
                reason = endpoint.failure_reason  # why its last update rolled back, shown until the next one
            if (status, reason) != (endpoint.status, endpoint.failure_reason):
                self._log_status("endpoint", endpoint.name, status, reason)
                self.state.endpoints.replace(endpoint, endpoint.model_copy(
                    update={"status": status, "failure_reason": reason, "modified": self.clock()}))

    def _progress(self, workloads: list[Workload], wanted: int, desired: Desired,
                  problems: dict[Workload, str]) -> Progress:
        proven = sum(1 for s in desired.specs if s.component in workloads and s.copy_id in self._proven)
        problem = next((problems[w] for w in workloads if w in problems), "")
        return Progress(wanted, proven, problem, next((self._steps[w] for w in workloads if w in self._steps), ""))

    @staticmethod
    def _log_status(kind: str, name: str, status: str, reason: str) -> None:
        log.info("%s %s is %s%s", kind, name, status, f": {reason}" if reason else "")

    def _finish_deletes(self, endpoints: Iterable[EndpointRecord], components: Iterable[ComponentRecord],
                        actual: Sequence[CopyStatus]) -> None:
        """A deleting resource disappears once none of its copies runs any more."""
        running = {c.component for c in actual if c.state is not CopyState.STOPPED}
        for component in components:
            # delete_if: not a component made again under this name since the tick read this one
            if (component.status == "Deleting" and component.name not in running
                    and self.state.components.delete_if(component)):
                log.info("inference component %s deleted", component.name)
        for endpoint in endpoints:
            mine = {v.workload(endpoint.name) for v in endpoint.fleet_variants}
            if endpoint.status == "Deleting" and not mine & running and self.state.endpoints.delete_if(endpoint):
                log.info("endpoint %s deleted", endpoint.name)


def _where(spec: CopySpec) -> str:
    """`cores (0, 1) and GPUs 2,3`, or `cores (0, 1), on CPU: ...` for the gateway's log."""
    where = f"cores {spec.cores}"
    if spec.gpus:
        return f"{where} and GPUs {','.join(spec.gpus)}"
    if spec.cpu_fallback:
        return f"{where}, on CPU: it asks for {spec.accelerators} GPU(s) this host lacks (--cpu-fallback)"
    return where


def _workload_of(copy_id: str, actual: Sequence[CopyStatus]) -> str:
    return next((c.component for c in actual if c.copy_id == copy_id), "")


def _gave_up(specs: Sequence[CopySpec], actual: Sequence[CopyStatus]) -> dict[Workload, str]:
    """Workloads with a desired copy the backend gave up on, with the copy's own words."""
    by_id = {c.copy_id: c for c in actual}
    failed: dict[Workload, str] = {}
    for spec in specs:
        status = by_id.get(spec.copy_id)
        if status is not None and status.state is CopyState.FAILED:
            failed.setdefault(Workload(spec.component), f"Copy {spec.copy_id} failed: {status.message}")
    return failed


def component_source(component: ComponentRecord) -> ModelSource:
    """Where a component's model files come from (a follower fetches an adapter's from there too)."""
    container = component.specification.Container
    return source_of(component.container, container.ArtifactUrl if container else None)
