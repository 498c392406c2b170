"""Which endpoint a name in a request reaches, read from the gateway's state the way its router resolves it."""

from __future__ import annotations

from pier.control.resource_store import ResourceStore
from pier.security.access import EndpointOf


def endpoint_of_state(state: ResourceStore) -> EndpointOf:
    """An endpoint is itself; a name that is no endpoint but an inference component reaches the component's
    endpoint (as pier.gateway.targets.Targets.resolve serves it); anything else reaches nothing (None)."""

    def endpoint_of(name: str) -> str | None:
        endpoint = state.endpoints.get(name)
        if endpoint is not None and endpoint.status != "Deleting":
            return endpoint.name
        component = state.components.get(name)
        if component is not None and component.status != "Deleting":
            return component.endpoint
        return None

    return endpoint_of
