"""Which copies an invocation goes to, from the stored endpoints and components: the `resolve` callback the
runtime (pier.runtime) calls for every request."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from pier.backends.base import CopyStatus
from pier.control.names import ACCOUNT
from pier.control.records import ComponentRecord, EndpointRecord, VariantRecord
from pier.control.state import State
from pier.control.workload import Workload
from pier.runtime.errors import EndpointNotFound, InvalidInvocation
from pier.runtime.target import Target

Copies = Callable[[Workload], list[CopyStatus]]


class Targets:
    def __init__(self, state: State, copies: Copies, *, pick: Callable[[Sequence[float]], int] | None = None) -> None:
        self.state = state
        self.copies = copies
        self.pick = pick or _weighted

    def resolve(self, endpoint: str, component: str | None, variant: str | None) -> Target:
        record = self.state.endpoints.get(endpoint)
        if record is None or record.status == "Deleting":
            # An OpenAI `model` may name an inference component on its own.
            hosted = self.state.components.get(endpoint) if component is None else None
            if hosted is not None and hosted.status != "Deleting":
                return self._component_target(hosted)
            raise EndpointNotFound(endpoint, ACCOUNT)
        if record.hosts_components:
            return self._component_target(self._component(record, component))
        if component is not None:
            raise InvalidInvocation(
                f"Endpoint {record.name} serves its model directly and has no inference components: drop the "
                f"InferenceComponentName ({component})."
            )
        chosen = self._variant(record, variant)
        workload = Workload.of_variant(record.name, chosen.name)
        return Target(self.copies(workload), workload, chosen.name)

    def _component_target(self, record: ComponentRecord) -> Target:
        workload = Workload.of_component(record.name)
        return Target(self.copies(workload), workload, record.variant)

    def _component(self, endpoint: EndpointRecord, name: str | None) -> ComponentRecord:
        hosted = [c for c in self.state.components.all()
                  if c.endpoint.lower() == endpoint.name.lower() and c.status != "Deleting"]
        if name is None:
            if len(hosted) == 1:  # unambiguous: spare the caller the header
                return hosted[0]
            names = ", ".join(c.name for c in hosted) or "none yet"
            raise InvalidInvocation(
                "Inference Component Name header is required for endpoints to which you plan to deploy inference "
                f"components. Please include Inference Component Name header (endpoint {endpoint.name} has: {names})."
            )
        for record in hosted:
            if record.name.lower() == name.lower():
                return record
        raise InvalidInvocation(
            f"Inference component {name} is not on endpoint {endpoint.name}: check InferenceComponentName "
            "(ListInferenceComponents shows what each endpoint hosts)."
        )

    def _variant(self, record: EndpointRecord, wanted: str | None) -> VariantRecord:
        if wanted is not None:
            found = record.variant(wanted)
            if found is None:
                names = ", ".join(v.name for v in record.variants)
                raise InvalidInvocation(f"Endpoint {record.name} has no variant {wanted}; its variants: {names}.")
            return found
        if len(record.variants) == 1:
            return record.variants[0]
        return record.variants[self.pick([v.weight for v in record.variants])]


def _weighted(weights: Sequence[float]) -> int:
    """A variant index drawn by weight (all zero: the first), as SageMaker splits traffic between variants."""
    if sum(weights) <= 0:
        return 0
    return random.choices(range(len(weights)), weights=weights)[0]
