"""Role checks, case by case (pure): admin does everything; invoke only calls models, and a limited key only its
endpoints' (with names resolved the way the gateway's router resolves them)."""

from __future__ import annotations

import json

import pytest

from pier.security.access import authorize, model_endpoint, needs_body
from pier.security.errors import AccessDenied
from pier.security.principal import Principal, Role
from pier.security.reach import reach_of

ADMIN = Principal("root", Role.ADMIN)
INVOKER = Principal("app", Role.INVOKE)
LIMITED = Principal("team", Role.INVOKE, ("Chat",))
# what the gateway serves under each name: endpoints are themselves, components reach their endpoint
SERVED = {"chat": "chat", "other": "other", "chat-ic": "chat", "other-ic": "other", "shadow": "other"}


def endpoint_of(name: str) -> str | None:
    return SERVED.get(name.lower())


def body(model: object) -> bytes:
    return json.dumps({"model": model}).encode()


@pytest.mark.parametrize(
    ("principal", "path", "payload", "allowed"),
    [
        (ADMIN, "/", None, True),
        (ADMIN, "/pier/copies", None, True),
        (ADMIN, "/endpoints/other/invocations", None, True),
        (INVOKER, "/", None, False),  # the control plane: creating a model can run code
        (INVOKER, "/pier/copies", None, False),
        (INVOKER, "/pier/copies/c1/logs", None, False),
        (INVOKER, "/docs", None, False),
        (INVOKER, "/ping", None, True),
        (INVOKER, "/endpoints/other/invocations", None, True),
        (INVOKER, "/v1/chat/completions", body("other"), True),
        (LIMITED, "/", None, False),
        (LIMITED, "/endpoints/chat/invocations", None, True),
        (LIMITED, "/endpoints/CHAT/invocations-response-stream", None, True),  # names are case-insensitive
        (LIMITED, "/endpoints/other/invocations", None, False),
        (LIMITED, "/endpoints/chat-ic/invocations", None, True),  # a component on its endpoint
        (LIMITED, "/endpoints/other-ic/invocations", None, False),
        (LIMITED, "/endpoints/chat/v1/chat/completions", body("anything"), True),
        (LIMITED, "/v1/chat/completions", body("chat"), True),
        (LIMITED, "/v1/chat/completions", body("chat/chat-ic"), True),
        (LIMITED, "/v1/completions", body("other"), False),
        (LIMITED, "/v1/completions", body("other-ic"), False),
        (LIMITED, "/v1/completions", body("shadow"), False),
        (LIMITED, "/v1/completions", body(None), False),
        (LIMITED, "/v1/completions", b"not json", False),
        (LIMITED, "/v1/completions", body(["chat"]), False),
        (LIMITED, "/v1/models", None, True),
        (LIMITED, "/v1/models/chat", None, True),
        (LIMITED, "/v1/models/other", None, True),  # not found by the route: the key may not call it
        (LIMITED, "/endpoints/nonexistent/invocations", None, False),
    ],
)
def test_authorize(principal: Principal, path: str, payload: bytes | None, allowed: bool) -> None:
    reach = reach_of(path)
    try:
        authorize(principal, reach, "op", payload, endpoint_of)
    except AccessDenied as denied:
        assert not allowed, denied.message
        assert principal.name in denied.message
    else:
        assert allowed


def test_a_component_named_like_an_allowed_endpoint_reaches_its_own_endpoint() -> None:
    """No endpoint `chat` exists, but a component `chat` on `other` does: the gateway would serve `other`."""
    moved = {"chat": "other"}
    with pytest.raises(AccessDenied):
        authorize(LIMITED, reach_of("/endpoints/chat/invocations"), "op", None, lambda name: moved.get(name))


def test_the_body_is_read_only_for_limited_keys_on_routes_that_name_the_endpoint_in_it() -> None:
    assert needs_body(LIMITED, reach_of("/v1/chat/completions"))
    assert not needs_body(LIMITED, reach_of("/endpoints/chat/invocations"))
    assert not needs_body(INVOKER, reach_of("/v1/chat/completions"))
    assert not needs_body(ADMIN, reach_of("/v1/chat/completions"))


@pytest.mark.parametrize(("payload", "endpoint"), [(body("e"), "e"), (body("e/ic"), "e"), (body("/ic"), None),
                                                   (body(3), None), (b"[]", None), (b"", None), (None, None)])
def test_model_endpoint(payload: bytes | None, endpoint: str | None) -> None:
    assert model_endpoint(payload) == endpoint
