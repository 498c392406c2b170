"""What an invocation is addressed to, as the control plane resolves it: the copies that may answer.

The gateway supplies `resolve(endpoint_name, inference_component, target_variant)`, sync or async,
returning a `Target` (or just the copies), or raising an InvocationError such as EndpointNotFound.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.errors import InvocationError, ModelNotReady, ServiceUnavailable
from pier.runtime.routing_strategy import DEFAULT_ROUTING, Routing
from pier.runtime.target_model import Models

DEFAULT_VARIANT = "AllTraffic"  # what the SageMaker SDK names a single variant

Resolved: TypeAlias = "Target | Sequence[CopyStatus]"
Resolve: TypeAlias = "Callable[[str, str | None, str | None], Resolved | Awaitable[Resolved]]"


@dataclass(frozen=True)
class Target:
    copies: Sequence[CopyStatus]  # every copy of the component, whatever its state
    component: str  # the inference component (or "<endpoint>/<variant>"): the unit of admission and routing
    variant: str = DEFAULT_VARIANT  # reported in x-Amzn-Invoked-Production-Variant
    routing: Routing = DEFAULT_ROUTING  # the variant's RoutingConfig
    models: Models | None = None  # a multi-model variant's models; None: it serves one model
    headers: Mapping[str, str] = field(default_factory=dict)  # sent to the copy too (an adapter's: control/adapters)
    # Headers that name a file on the gateway's host (an adapter's GGUF): each copy is sent the path where it reads
    # that file (Forwarder.paths_on), which on another Ray node is the node's copy of it.
    files: Mapping[str, str] = field(default_factory=dict)
    # Why the control plane says the endpoint or component is not in service (its FailureReason), for the answer
    # when no copy can take a request
    failure: str = ""

    @classmethod
    def of(cls, endpoint: str, copies: Sequence[CopyStatus]) -> Target:
        """A target from bare copies: the component is theirs, the variant follows "<endpoint>/<variant>"."""
        component = copies[0].component if copies else endpoint
        variant = component.split("/", 1)[1] if "/" in component else DEFAULT_VARIANT
        return cls(copies, component, variant)

    def ready(self) -> list[CopyStatus]:
        return [c for c in self.copies if c.state is CopyState.READY and c.url]

    def unavailable(self, endpoint: str) -> InvocationError:
        """Why no copy can take a request now: loading (429, not retried by boto3), or none usable (503)."""
        if not self.copies:
            why = f" It failed: {self.failure}" if self.failure else (
                " Check the endpoint's status and its inference components' copy counts.")
            return ServiceUnavailable(f"Endpoint {endpoint} has no copies of {self.component} running.{why}")
        states = "; ".join(f"{c.copy_id} {c.state.value.lower()}{': ' + c.message if c.message else ''}"
                           for c in self.copies)
        if any(c.state is CopyState.STARTING for c in self.copies):
            return ModelNotReady(
                f"The model of endpoint {endpoint} ({self.component}) is still loading ({states}). Retry in a few "
                "seconds."
            )
        if self.failure:
            return ServiceUnavailable(f"No copy of {self.component} on endpoint {endpoint} is ready ({states}). It "
                                      f"failed: {self.failure}")
        return ServiceUnavailable(
            f"No copy of {self.component} on endpoint {endpoint} is ready ({states}). Retry shortly; if copies keep "
            "failing, read their logs."
        )


async def resolve_target(resolve: Resolve, endpoint: str, component: str | None, variant: str | None) -> Target:
    resolved = resolve(endpoint, component, variant)
    if inspect.isawaitable(resolved):
        resolved = await resolved
    return resolved if isinstance(resolved, Target) else Target.of(endpoint, list(resolved))
