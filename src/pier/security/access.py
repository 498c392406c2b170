"""What a principal may do. The control plane is admin only: creating a model whose data holds
code/inference.py or a requirements.txt makes the gateway run code, so an invoke key can never reach it. The
runtime and OpenAI routes only call models that exist; a key limited to some endpoints calls only those."""

from __future__ import annotations

import json
from collections.abc import Callable

from pier.security.errors import AccessDenied
from pier.security.principal import Principal, Role
from pier.security.reach import Reach

EndpointOf = Callable[[str], str | None]  # a name in a URL or `model` -> the endpoint serving it (None: unknown)


def authorize(principal: Principal, reach: Reach, operation: str, body: bytes | None, endpoint_of: EndpointOf
              ) -> None:
    """Raise AccessDenied unless `principal` may make this call. `body` is needed only for an endpoint-limited key
    on an OpenAI route that names the endpoint in `model` (see `needs_body`)."""
    if reach.open or principal.is_admin:
        return
    if not reach.invokes:
        raise AccessDenied(
            f"User: {principal.describe()} is not authorized to perform: {operation}: only admin keys may use the "
            "control plane and pier's own routes. Use an admin key (`pier keys create NAME --role admin`).")
    if not principal.endpoints:
        return
    endpoint: str | None
    if reach.endpoint is not None:
        endpoint = reach.endpoint
    elif reach.model_in_body:
        endpoint = model_endpoint(body)
    else:
        return  # GET /v1/models[/MODEL]: names only, the caller's
    if endpoint is None or not _may_call(principal, endpoint, endpoint_of):
        named = f"endpoint {endpoint}" if endpoint else "a request whose body names no endpoint in `model`"
        raise AccessDenied(
            f"User: {principal.describe()} is not authorized to perform: {operation} on {named}. Use a key for that "
            f"endpoint (`pier keys create NAME --role invoke --endpoint {endpoint or 'ENDPOINT'}`).")


def needs_body(principal: Principal, reach: Reach) -> bool:
    return principal.role is Role.INVOKE and bool(principal.endpoints) and reach.model_in_body


def model_endpoint(body: bytes | None) -> str | None:
    """The endpoint an OpenAI body names: `model` is "ENDPOINT" or "ENDPOINT/INFERENCE_COMPONENT", as the
    gateway's OpenAI routes read it."""
    try:
        model = json.loads(body or b"").get("model")
    except (ValueError, AttributeError):
        return None
    return model.partition("/")[0] or None if isinstance(model, str) else None


def _may_call(principal: Principal, name: str, endpoint_of: EndpointOf) -> bool:
    """The gateway serves a name that is not an endpoint as the inference component of that name, wherever it is
    hosted; `endpoint_of` resolves the name the same way, so a limited key reaches only its endpoints' models."""
    owner = endpoint_of(name)
    return principal.may_invoke(owner if owner is not None else name)
