"""How the gateway's security is set: allowed host names and origins, the address it listens on (which decides
whether keys are required), session keys."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pier.env import GATEWAY, Env, listed
from pier.security.hosts import HostPolicy, is_loopback, is_wildcard
from pier.security.keystore import StoredKey

ALLOWED_HOSTS_ENV = "PIER_ALLOWED_HOSTS"  # comma-separated, like --allow-host
ALLOWED_ORIGINS_ENV = "PIER_ALLOWED_ORIGINS"  # comma-separated, like --allow-origin


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SecuritySettings:
    allowed_hosts: tuple[str, ...] = ()  # --allow-host and PIER_ALLOWED_HOSTS; "*" = any Host
    bind_host: str = "127.0.0.1"
    session_keys: tuple[StoredKey, ...] = field(default=(), repr=False)
    clock: Callable[[], datetime] = utc_now
    allowed_origins: tuple[str, ...] = ()  # --allow-origin and PIER_ALLOWED_ORIGINS, besides pier's own
    insecure: bool = False  # --insecure: beyond loopback, no keys means no authentication (not: refuse everything)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, allowed_hosts: Iterable[str] = (),
                 bind_host: str = "127.0.0.1", session_keys: Iterable[StoredKey] = (),
                 allowed_origins: Iterable[str] = (), insecure: bool = False) -> SecuritySettings:
        read = Env(env, GATEWAY)
        hosts = (*allowed_hosts, *(read.get(ALLOWED_HOSTS_ENV, cast=listed) or ()))
        origins = (*allowed_origins, *(read.get(ALLOWED_ORIGINS_ENV, cast=listed) or ()))
        return cls(hosts, bind_host, tuple(session_keys), allowed_origins=origins, insecure=insecure)

    def host_policy(self) -> HostPolicy:
        """The configured names, the name pier was told to bind, and, when it listens beyond loopback, this
        machine's own host name (a browser cannot be made to send it from another site's page)."""
        names = list(self.allowed_hosts)
        if not is_wildcard(self.bind_host):
            names.append(self.bind_host)
        if not is_loopback(self.bind_host):
            names.append(socket.gethostname())
        return HostPolicy.of(names, self.allowed_origins)
