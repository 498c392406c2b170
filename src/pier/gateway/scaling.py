"""Autoscaling joined to the rest of the gateway: `GatewayCounts` is the scaler's view of copy and instance
counts (the control plane's own operations change them, so the reconciler and the backend stay the one path), and
`Waking` holds requests for a component at zero copies while the scaler starts one."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from pier.autoscaling.counts import Count, Refused, Utilization
from pier.autoscaling.recorder import Recorder
from pier.autoscaling.resource import Resource, resource_of
from pier.autoscaling.scaler import Scaler
from pier.backends.base import CopyState, CopyStatus
from pier.control.api import ControlPlane
from pier.control.errors import ControlError
from pier.control.names import DEFAULT_REGION
from pier.control.resource_store import ResourceStore, UnreadableRecord
from pier.control.workload import Workload
from pier.gateway.usage import ProcessUsage, memory_total
from pier.runtime.admission import Admission

Copies = Callable[[Workload], list[CopyStatus]]
POLL_S = 0.05  # how often a waiting request looks for a ready copy


class GatewayCounts:
    def __init__(self, state: ResourceStore, control: ControlPlane, copies: Copies, admission: Admission, *,
                 local: bool = False) -> None:
        self.state = state
        self.control = control
        self.copies = copies
        self.admission = admission
        self.processes = ProcessUsage() if local else None  # copies' processes are on this host
        self.memory_total = memory_total() if local else 0
        self.waking: Counter[str] = Counter()  # requests waiting for a component's first copy

    def missing(self, resource: Resource) -> str | None:
        try:
            if resource.component is not None:
                component = self.state.components.get(resource.component)
                if component is None or component.status == "Deleting":
                    return (f"Inference component {resource.component} does not exist: create it "
                            "(CreateInferenceComponent) before registering it as a scalable target.")
                return None
            endpoint = self.state.endpoints.get(str(resource.endpoint))
        except UnreadableRecord as error:
            return error.message
        if endpoint is None or endpoint.status == "Deleting":
            return f"Endpoint {resource.endpoint} does not exist: create it before registering its variant."
        if endpoint.variant(str(resource.variant)) is None:
            names = ", ".join(v.name for v in endpoint.variants)
            return f"Endpoint {resource.endpoint} has no variant {resource.variant}; its variants: {names}."
        return None

    def floor(self, resource: Resource) -> int:
        if resource.component is not None:
            return 0
        try:
            endpoint = self.state.endpoints.get(str(resource.endpoint))
        except UnreadableRecord:
            return 1
        return 0 if endpoint is not None and endpoint.async_inference is not None else 1

    def count(self, resource: Resource) -> Count | None:
        try:
            return self._count(resource)
        except UnreadableRecord:
            return None

    def _count(self, resource: Resource) -> Count | None:
        if resource.component is not None:
            component = self.state.components.get(resource.component)
            if component is None or component.status == "Deleting":
                return None
            problem = component.failure_reason if component.status == "Failed" else ""
            return Count(component.copies, self._ready(Workload.of_component(component.name)), problem)
        endpoint = self.state.endpoints.get(str(resource.endpoint))
        variant = endpoint.variant(str(resource.variant)) if endpoint is not None else None
        if endpoint is None or variant is None or endpoint.status == "Deleting":
            return None
        problem = endpoint.failure_reason if endpoint.status == "Failed" else ""
        ready = self._ready(variant.workload(endpoint.name)) if variant.model else 0
        return Count(variant.instance_count, ready if variant.model else variant.instance_count, problem)

    def set(self, resource: Resource, count: int) -> None:
        body: dict[str, Any]
        if resource.component is not None:
            operation = "UpdateInferenceComponentRuntimeConfig"
            body = {"InferenceComponentName": resource.component, "DesiredRuntimeConfig": {"CopyCount": count}}
        else:
            operation = "UpdateEndpointWeightsAndCapacities"
            body = {"EndpointName": resource.endpoint, "DesiredWeightsAndCapacities": [
                {"VariantName": resource.variant, "DesiredInstanceCount": count}]}
        try:
            self.control.call(operation, body, DEFAULT_REGION)
        except ControlError as error:
            raise Refused(error.message) from None

    def _workload(self, resource: Resource) -> str:
        """The copies' workload: a variant's carries the fleet of its last blue/green update (pier.control.
        deployment)."""
        if resource.component is None:
            try:
                endpoint = self.state.endpoints.get(str(resource.endpoint))
            except UnreadableRecord:
                endpoint = None
            variant = endpoint.variant(str(resource.variant)) if endpoint is not None else None
            if endpoint is not None and variant is not None:
                return variant.workload(endpoint.name)
        return resource.workload

    def load(self, resource: Resource) -> float:
        workload = self._workload(resource)
        return float(self.admission.in_use(workload) + self.admission.waiting(workload) + self.waking[workload])

    def usage(self, resource: Resource) -> Utilization | None:
        if self.processes is None or not self.memory_total:
            return None
        copies = [c for c in self.copies(Workload(self._workload(resource))) if c.state is CopyState.READY and c.pid]
        used = self.processes.sample(c.pid for c in copies if c.pid is not None)
        return Utilization(used.cpu_cores * 100.0, len(os.sched_getaffinity(0)),
                           100.0 * used.memory_bytes / self.memory_total)

    def _ready(self, workload: Workload) -> int:
        return sum(1 for c in self.copies(workload) if c.state is CopyState.READY)

    async def until_ready(self, workload: Workload, timeout_s: float) -> bool:
        """Wait (counted as load) until `workload` has a ready copy; False when `timeout_s` passed first."""
        self.waking[workload] += 1
        try:
            async with asyncio.timeout(max(timeout_s, 0.0)):
                while not self._ready(workload):
                    await asyncio.sleep(POLL_S)
            return True
        except TimeoutError:
            return False
        finally:
            self.waking[workload] -= 1
            if self.waking[workload] <= 0:
                del self.waking[workload]


class Waking:
    """The `Waker` the gateway's targets use: pier's scale from zero, over the scaler and the recorder."""

    def __init__(self, scaler: Scaler, counts: GatewayCounts, recorder: Recorder, wait_s: float) -> None:
        self.scaler = scaler
        self.counts = counts
        self.recorder = recorder
        self.wait_s = wait_s

    def no_capacity(self, component: str) -> None:
        self.recorder.no_capacity_failure(component)

    def wake(self, component: str) -> bool:
        return self.scaler.wake(resource_of(f"inference-component/{component}"))

    def scaled(self, component: str) -> bool:
        return self.scaler.scaled(resource_of(f"inference-component/{component}"))

    def until_ready(self, component: str) -> Awaitable[bool]:
        return self.counts.until_ready(Workload.of_component(component), self.wait_s)
