"""What the runtime tells whoever watches its invocations (the gateway's metric recorder, pier.autoscaling),
without importing them: one `Invoked` per request that reached the forwarder, as it ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pier.multi_model import CacheReport


@dataclass(frozen=True)
class Invoked:
    endpoint: str
    variant: str
    workload: str  # the inference component, or "<endpoint>/<variant>"
    status: int  # the status the client got (the copy's, or the gateway's error's)
    model_s: float  # from sending to the copy until its answer was read (0 when it never reached one)
    overhead_s: float  # the rest: resolving, waiting for a copy with room
    copies: int  # ready copies when it was resolved
    model_cache: CacheReport | None = None  # a multi-model endpoint's: how the copy found the TargetModel
    # The model's own status when the client got a ModelError (424): what the copy answered, or 0 when it ran out
    # of time or dropped the connection. None when the client got the copy's answer or the gateway's own error.
    model_status: int | None = None


class InvocationObserver(Protocol):
    def invoked(self, done: Invoked) -> None: ...
