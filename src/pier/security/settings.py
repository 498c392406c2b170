"""How the gateway's security is set: allowed host names, the address it listens on, session keys."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pier.security.hosts import HostPolicy, is_loopback, is_wildcard
from pier.security.keystore import StoredKey

ALLOWED_HOSTS_ENV = "PIER_ALLOWED_HOSTS"  # comma-separated, like --allow-host


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SecuritySettings:
    allowed_hosts: tuple[str, ...] = ()  # --allow-host and PIER_ALLOWED_HOSTS; "*" = any Host
    bind_host: str = "127.0.0.1"
    session_keys: tuple[StoredKey, ...] = field(default=(), repr=False)
    clock: Callable[[], datetime] = utc_now

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, allowed_hosts: Iterable[str] = (),
                 bind_host: str = "127.0.0.1", session_keys: Iterable[StoredKey] = ()) -> SecuritySettings:
        env = os.environ if env is None else env
        listed = [name.strip() for name in env.get(ALLOWED_HOSTS_ENV, "").split(",") if name.strip()]
        return cls((*allowed_hosts, *listed), bind_host, tuple(session_keys))

    def host_policy(self) -> HostPolicy:
        """The configured names, the name pier was told to bind, and, when it listens beyond loopback, this
        machine's own host name (a browser cannot be made to send it from another site's page)."""
        names = list(self.allowed_hosts)
        if not is_wildcard(self.bind_host):
            names.append(self.bind_host)
        if not is_loopback(self.bind_host):
            names.append(socket.gethostname())
        return HostPolicy.of(names)
