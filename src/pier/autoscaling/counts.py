"""What the scaler needs of the rest of the gateway, as a protocol: the gateway (pier.gateway.scaling)
implements it over the control plane's own operations and the runtime's queues, so scaling takes the one path
every change of copy or instance count takes (stored desired state, then the reconciler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pier.autoscaling.resource import Resource


@dataclass(frozen=True)
class Count:
    desired: int  # the stored copy or instance count
    ready: int  # copies ready to take requests now
    problem: str = ""  # why the control plane cannot get there (its failure reason), if it says


class Refused(Exception):
    """The control plane would not make the change; the message says why (it does not fit, the endpoint is
    updating...)."""


class Counts(Protocol):
    def missing(self, resource: Resource) -> str | None:
        """Why `resource` cannot be scaled (it does not exist...), or None."""
        ...

    def count(self, resource: Resource) -> Count | None:
        """None when the resource is gone."""
        ...

    def floor(self, resource: Resource) -> int:
        """The fewest copies or instances it may be scaled to: 0 for an inference component or a variant of an
        asynchronous endpoint (work waits in its queue), 1 for other variants."""
        ...

    def set(self, resource: Resource, count: int) -> None:
        """Change the stored count through the control plane; raises Refused."""
        ...

    def load(self, resource: Resource) -> float:
        """Requests in flight on its copies plus those waiting for one."""
        ...

    def usage(self, resource: Resource) -> Utilization | None:
        """Its copies' CPU and memory now, when they can be read (copies on this host)."""
        ...


@dataclass(frozen=True)
class Utilization:
    cpu_percent: float  # 100 per core busy, summed over the copies (CloudWatch's CPUUtilization)
    cores: int  # the cores they may use, to normalize
    memory_percent: float  # of this host's memory
