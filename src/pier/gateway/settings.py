"""Everything `pier up` reads from its environment, with the command-line flags that join it: read once where the
gateway starts (pier.gateway.run) and passed down, so no part of the gateway reads the environment on its own.

Each package names its own variables (pier.runtime.settings, pier.autoscaling.settings, pier.control.backups, ...)
and reads them through pier.env; this gathers them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pier.autoscaling.settings import ScalingSettings
from pier.capture.capture_writer import CaptureSettings
from pier.control.backups import BackupPolicy
from pier.control.capacity import COPY_CAP_SETTING, CopyCap, copy_cap_of, copy_cap_setting
from pier.env import GATEWAY, Env, SettingsError
from pier.gateway.drain import DEFAULT_GRACE_S, grace_period
from pier.runtime.settings import RuntimeSettings
from pier.security.keystore import StoredKey
from pier.security.settings import SecuritySettings
from pier.state_folder.postgres import is_url, shown

NOTIFICATION_RELAY_SETTING = "PIER_ASYNC_NOTIFICATION_URL"  # where notifications for SNS topics are POSTed
STATE_URL_SETTING = "PIER_STATE_URL"  # the stores in a PostgreSQL database instead of the state folder
CLUSTER_COPY_CAP = 1024  # copies on a cluster (ray backend) unless PIER_MAX_COPIES_PER_HOST says otherwise


@dataclass(frozen=True)
class GatewaySettings:
    runtime: RuntimeSettings = field(default_factory=RuntimeSettings)
    scaling: ScalingSettings = field(default_factory=ScalingSettings)
    backups: BackupPolicy = field(default_factory=BackupPolicy)
    capture: CaptureSettings = field(default_factory=CaptureSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    max_copies_per_host: int | None = None  # PIER_MAX_COPIES_PER_HOST; None: from the host (or the cluster default)
    notification_relay: str | None = None  # PIER_ASYNC_NOTIFICATION_URL: SNS topics' notifications go there
    grace_s: float = DEFAULT_GRACE_S  # --grace-period, else PIER_GRACE_PERIOD_S: how long a stop lets requests end
    cpu_fallback: bool = False  # --cpu-fallback: copies that want GPUs this host lacks run on CPU
    state_url: str | None = None  # --state-url, else PIER_STATE_URL: every store in that PostgreSQL database

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, grace_period_s: float | None = None,
                 cpu_fallback: bool = False, bind_host: str = "127.0.0.1", allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = (), session_keys: Iterable[StoredKey] = (),
                 insecure: bool = False, state_url: str | None = None) -> GatewaySettings:
        """The environment's settings (`env`, default this process's) with the flags given; a value that cannot
        be used is a SettingsError that names its variable."""
        return cls(
            runtime=RuntimeSettings.from_env(env), scaling=ScalingSettings.from_env(env),
            backups=BackupPolicy.from_env(env), capture=CaptureSettings.from_env(env),
            security=SecuritySettings.from_env(env, allowed_hosts=allowed_hosts, bind_host=bind_host,
                                               session_keys=session_keys, allowed_origins=allowed_origins,
                                               insecure=insecure),
            max_copies_per_host=copy_cap_setting(env),
            notification_relay=Env(env, GATEWAY).text(NOTIFICATION_RELAY_SETTING),
            grace_s=grace_period(grace_period_s, env), cpu_fallback=cpu_fallback,
            state_url=state_url_of(state_url, env))

    def copy_cap(self, on_cluster: bool) -> CopyCap:
        """The cap on copies: this host's (PIER_MAX_COPIES_PER_HOST, else from its cores and memory) or, when they
        run on a cluster's nodes, PIER_MAX_COPIES_PER_HOST, else a bound only against runaway counts (the
        cluster's free capacity is what really limits them)."""
        if on_cluster and self.max_copies_per_host is None:
            return CopyCap(CLUSTER_COPY_CAP, f"the default on a cluster; {COPY_CAP_SETTING} changes it")
        return copy_cap_of(self.max_copies_per_host)


def state_url_of(flag: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """--state-url, else PIER_STATE_URL: a postgresql:// URL, or None (the state folder's files)."""
    url = flag or Env(env, GATEWAY).text(STATE_URL_SETTING)
    if url and not is_url(url):
        raise SettingsError(f"--state-url / {STATE_URL_SETTING} {shown(url)!r} is not a PostgreSQL URL: give "
                            "postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE, or leave it unset to keep the state "
                            "in the state folder.")
    return url or None
