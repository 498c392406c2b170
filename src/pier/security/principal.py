"""Who is calling: a named principal with a role, optionally limited to some endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"  # the control plane (which can make the gateway run code), copies and their logs, and invoking
    INVOKE = "invoke"  # the runtime and OpenAI routes only: it can never cause code to run


ROLE_HELP = {
    Role.ADMIN: "the SageMaker control plane (create/update/delete models, endpoints, ...), /pier/copies and "
                "copy logs, and every runtime and OpenAI route",
    Role.INVOKE: "the SageMaker runtime (InvokeEndpoint, response streaming) and the OpenAI routes",
}


@dataclass(frozen=True)
class Principal:
    name: str
    role: Role
    endpoints: tuple[str, ...] = ()  # the endpoints it may invoke; () = every endpoint

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN

    def may_invoke(self, endpoint: str) -> bool:
        """SageMaker names are case-insensitive, so the limit is too."""
        return not self.endpoints or endpoint.lower() in {name.lower() for name in self.endpoints}

    def describe(self) -> str:
        limit = f" limited to {', '.join(self.endpoints)}" if self.endpoints else ""
        return f"pier key {self.name!r} (role {self.role.value}{limit})"


STATE_NAME = "pier_principal"  # request.state's name for who the guard let in


def caller(state: object) -> Principal | None:
    """Who the guard let in, from a route's `request.state` (None where no guard runs: a bare app in a test)."""
    found = getattr(state, STATE_NAME, None)
    return found if isinstance(found, Principal) else None


ANONYMOUS = Principal("anonymous", Role.ADMIN)  # every caller, when no keys exist (a loopback-only gateway)
