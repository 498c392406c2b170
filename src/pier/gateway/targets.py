"""Which copies an invocation goes to, from the stored endpoints and components: the `resolve` callback the
runtime (pier.runtime) calls for every request.

A call that SageMaker refuses is refused here too, with SageMaker's words where they are known, so code written
against pier does not break on AWS: an endpoint that hosts inference components is always invoked with an
InferenceComponentName (even when it hosts just one), and an endpoint that serves its model directly never is.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from pier.backends.base import CopyState, CopyStatus
from pier.control import adapters
from pier.control.deployment import green_share, pick_fleet
from pier.control.names import ACCOUNT
from pier.control.records import ComponentRecord, EndpointRecord, RoutingRecord, VariantRecord
from pier.control.resource_store import ResourceStore, UnreadableRecord
from pier.control.workload import Workload
from pier.gateway.adapter_files import AdapterFiles
from pier.runtime.errors import ComponentRequired, EndpointNotFound, InvalidInvocation
from pier.runtime.routing_strategy import DEFAULT_ROUTING, Routing, Strategy
from pier.runtime.target import Target
from pier.runtime.target_model import Models

Copies = Callable[[Workload], list[CopyStatus]]


class Waker(Protocol):
    """Autoscaling's part in resolving (pier.gateway.scaling.Waking): a component with a scalable target and no
    ready copy is woken and waited for instead of refused."""

    def no_capacity(self, component: str) -> None:
        """Record NoCapacityInvocationFailures: a request found the component at zero copies."""
        ...

    def wake(self, component: str) -> bool:
        """Start a copy if it has none; False when the component is not autoscaled (or is held at zero)."""
        ...

    def scaled(self, component: str) -> bool:
        """Whether the component has a scalable target."""
        ...

    def until_ready(self, component: str) -> Awaitable[bool]:
        """Wait for a ready copy, bounded; False when time ran out."""
        ...

# SageMaker's own ValidationError messages, verbatim.
# Quoted from boto3's error by users of JumpStart endpoints (github.com/aws-samples/amazon-kendra-langchain-extensions
# issue 64, github.com/garystafford/llm-langchain-sql-demo issue 1).
COMPONENT_REQUIRED = (
    "Inference Component Name header is required for endpoints to which you plan to deploy inference components. "
    "Please include Inference Component Name header or consider using SageMaker models."
)
# SageMaker's answer as LiteLLM's SageMaker integration tests replay it (with "dont" as AWS spells it); a user's
# write-up of a JumpStart endpoint quotes its first words ("Inference Component Name header is not allowed").
COMPONENT_NOT_ALLOWED = (
    "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference "
    "components. Please remove the Inference Component Name header and try again."
)
# A component scaled to zero copies: AWS's blog on scaling inference components down to zero quotes it, and a
# client library recorded the same words from a real endpoint at zero copies.
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if "
    "configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


class Targets:
    def __init__(self, state: ResourceStore, copies: Copies, *, pick: Callable[[Sequence[float]], int] | None = None,
                 waker: Waker | None = None, draw: Callable[[], float] = random.random,
                 adapter_files: AdapterFiles | None = None) -> None:
        self.state = state
        self.copies = copies
        self.pick = pick or _weighted
        self.draw = draw  # uniform in [0, 1): which fleet a request goes to during an update
        self.waker = waker
        self.adapter_files = adapter_files  # None: an adapter's file is where its record says, on this host

    def resolve(self, endpoint: str, component: str | None, variant: str | None) -> Target | Awaitable[Target]:
        try:
            return self._resolve(endpoint, component, variant)
        except UnreadableRecord as error:  # only that resource is unusable; say why, as Describe does
            raise InvalidInvocation(error.message) from None

    def _resolve(self, endpoint: str, component: str | None, variant: str | None) -> Target | Awaitable[Target]:
        record = self.state.endpoints.get(endpoint)
        if record is None or record.status == "Deleting":
            # An OpenAI `model` may name an inference component on its own (pier's /v1 routes only).
            hosted = self.state.components.get(endpoint) if component is None else None
            if hosted is not None and hosted.status != "Deleting":
                return self._component_target(hosted)
            raise EndpointNotFound(endpoint, ACCOUNT)
        if variant is not None:
            self._variant(record, variant)  # a variant the endpoint does not have is refused either way
        if record.hosts_components:
            if component is None:
                raise ComponentRequired(COMPONENT_REQUIRED)
            return self._component_target(self._component(record, component))
        if component is not None:
            raise InvalidInvocation(COMPONENT_NOT_ALLOWED)
        chosen = self._variant(self._fleet(record, variant), variant)
        workload = chosen.workload(record.name)
        return Target(self.copies(workload), workload, chosen.name, routing(chosen.routing),
                      models=_models(chosen), failure=_failure(record))

    def _fleet(self, record: EndpointRecord, variant: str | None) -> EndpointRecord:
        """The endpoint as this request sees it: during an update, its new fleet for the share of traffic that has
        moved there (pier.control.deployment), its own variants otherwise."""
        pending = record.deployment
        if pending is None or record.status != "Updating":
            return record
        green = record.model_copy(update={"variants": tuple(v for v in pending.variants if v.model is not None)})
        if variant is not None and green.variant(variant) is None:
            return record
        return green if pick_fleet(green_share(pending), self.draw()) else record

    def _component_target(self, record: ComponentRecord) -> Target | Awaitable[Target]:
        if adapters.is_adapter(record):
            return self._adapter_target(record)
        workload = Workload.of_component(record.name)
        copies = self.copies(workload)
        if record.copies == 0:
            if self.waker is not None:
                self.waker.no_capacity(record.name)
            if self.waker is None or not self.waker.wake(record.name):
                raise InvalidInvocation(NO_CAPACITY)
            return self._when_ready(record, workload, woken=True)
        ready = any(c.state is CopyState.READY for c in copies)
        if not ready and self.waker is not None and self.waker.scaled(record.name):
            return self._when_ready(record, workload, woken=False)  # a copy the scaler started is on its way
        return Target(copies, workload, record.variant, self._routing(record), failure=_failure(record))

    def _adapter_target(self, record: ComponentRecord) -> Target | Awaitable[Target]:
        """An adapter runs on its base's copies, which are told which adapter (pier.control.adapters)."""
        base = self.state.components.get(adapters.base_name(record))
        if record.model_dir is None or record.status not in ("InService", "Updating") or base is None:
            raise InvalidInvocation(
                f"Adapter inference component {record.name} is {record.status}"
                f"{': ' + record.failure_reason if record.failure_reason else ''}: invoke it once "
                "DescribeInferenceComponent says InService.")
        headers = adapters.adapter_headers(record)
        fetcher = self.adapter_files
        files = adapters.adapter_files(record) if fetcher is None else fetcher.here(record)
        resolved = self._component_target(base)
        if isinstance(resolved, Target) and files is not None:
            return dataclasses.replace(resolved, headers=headers, files=files)

        async def with_headers() -> Target:
            target = resolved if isinstance(resolved, Target) else await resolved
            if files is not None:
                return dataclasses.replace(target, headers=headers, files=files)
            assert fetcher is not None  # this host lacks the leader's folder: the gateway fetches the adapter itself
            return dataclasses.replace(target, headers=headers, files=await fetcher.fetched(record))
        return with_headers()

    async def _when_ready(self, record: ComponentRecord, workload: Workload, *, woken: bool) -> Target:
        assert self.waker is not None
        if not await self.waker.until_ready(record.name):
            why = (f"pier started a copy of {record.name} for this request, but it was not ready in time" if woken
                   else f"{record.name} is autoscaled and none of its copies became ready in time")
            raise InvalidInvocation(f"{NO_CAPACITY} ({why}; retry, raise PIER_QUEUE_TIMEOUT_SECONDS, or read the "
                                    "copies' logs.)")
        return Target(self.copies(workload), workload, record.variant, self._routing(record))

    def _routing(self, record: ComponentRecord) -> Routing:
        """A component is routed as its endpoint's variant says."""
        endpoint = self.state.endpoints.get(record.endpoint)
        variant = endpoint.variant(record.variant) if endpoint is not None else None
        return routing(variant.routing if variant is not None else None)

    def _component(self, endpoint: EndpointRecord, name: str) -> ComponentRecord:
        record = self.state.components.get(name)  # by name, in any case: one row, not every component's
        if record is not None and record.endpoint.lower() == endpoint.name.lower() and record.status != "Deleting":
            return record
        # pier's words: SageMaker's for this case are not known.
        raise InvalidInvocation(
            f"Inference component {name} is not on endpoint {endpoint.name}: check InferenceComponentName "
            "(ListInferenceComponents shows what each endpoint hosts)."
        )

    def _variant(self, record: EndpointRecord, wanted: str | None) -> VariantRecord:
        if wanted is not None:
            found = record.variant(wanted)
            if found is None:
                # pier's words: SageMaker's for this case are not known.
                names = ", ".join(v.name for v in record.variants)
                raise InvalidInvocation(
                    f"Endpoint {record.name} has no variant {wanted}; its variants: {names}. Check TargetVariant.")
            return found
        production = [v for v in record.variants if not v.shadow]  # a shadow only gets copies (gateway/taps.py)
        if len(production) == 1:
            return production[0]
        return production[self.pick([v.weight for v in production])]


def routing(record: RoutingRecord | None) -> Routing:
    """A variant's stored RoutingConfig as the copy chooser applies it; the copies of its inference components are
    routed by it too."""
    if record is None:
        return DEFAULT_ROUTING
    return Routing(Strategy(record.strategy), record.prefix_length or 0, record.concurrency_threshold or 0)


def _weighted(weights: Sequence[float]) -> int:
    """A variant index drawn by weight (all zero: the first), as SageMaker splits traffic between variants."""
    if sum(weights) <= 0:
        return 0
    return random.choices(range(len(weights)), weights=weights)[0]


def _models(variant: VariantRecord) -> Models | None:
    """Where a multi-model variant's models are: its fetched folder and the prefix the user gave."""
    container = variant.container
    if container is None or not container.multi_model or variant.model_dir is None:
        return None
    url = container.ModelDataUrl or (container.ModelDataSource.S3DataSource.S3Uri
                                     if container.ModelDataSource and container.ModelDataSource.S3DataSource else "")
    return Models(variant.model_dir, url)


def _failure(record: EndpointRecord | ComponentRecord) -> str:
    """A Failed endpoint's or component's FailureReason, for the invocation no copy can take."""
    return record.failure_reason if record.status == "Failed" else ""
