"""One copy as `/pier/copies` lists it (for `pier ls`, `describe`, `logs` and the console): its status as its backend
reports it, where it runs (its instance, cores and device), where its log is kept, and which gateway owns it. The
leader lists its own; it publishes the same to the copy board (gateway/copy_board.py), so a follower lists them
alike (gateway/copy_view.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pier.backends.base import CopySpec, CopyStatus


@dataclass(frozen=True)
class ListedCopy:
    status: CopyStatus  # as its backend reports it (a draining copy still Ready), with its URL and secret
    routed: CopyStatus  # as the leader's router sees it: a draining copy not ready (control/reconciler.py)
    placement: Mapping[str, Any] = field(default_factory=lambda: placement(None))
    log_file: str | None = None  # its log on the owner's host, where gateways on that host read it (local backend)
    owner: str | None = None  # the gateway that owns it (the leader), as it names itself

    def as_json(self) -> dict[str, Any]:
        """Its `/pier/copies` row (never its secret)."""
        status = self.status
        return {"copy_id": status.copy_id, "component": status.component, "state": status.state.value,
                "url": status.url, "message": status.message, "restarts": status.restarts, "pid": status.pid,
                "concurrency": status.concurrency, "kernels": status.kernels, **self.placement, "owner": self.owner}


def placement(spec: CopySpec | None) -> dict[str, Any]:
    """Where the copy runs: its instance ("<endpoint>/<variant>#<index>" and type), the cores it is pinned to, and
    its device: the GPUs it holds, or the CPU (with `cpu_fallback` when it asked for GPUs the host lacks)."""
    if spec is None:
        return {"instance": None, "instance_type": None, "cores": [], "device": None, "gpus": [],
                "accelerators": 0, "cpu_fallback": False}
    devices = {"device": device(spec), "gpus": list(spec.gpus), "accelerators": spec.accelerators,
               "cpu_fallback": spec.cpu_fallback}
    if spec.instance is None:
        return {"instance": None, "instance_type": None, "cores": list(spec.cores), **devices}
    instance = spec.instance
    return {"instance": f"{instance.variant}#{instance.index}", "instance_type": instance.type,
            "cores": list(spec.cores), **devices}


def device(spec: CopySpec) -> str:
    """`gpu` (CUDA_VISIBLE_DEVICES names its GPUs), `cpu`, or `gpu (ray)` for a copy whose node's Ray hands it its
    GPUs (the gateway does not know their ids)."""
    if spec.gpus:
        return "gpu"
    if spec.accelerators and not spec.cpu_fallback:
        return "gpu (ray)"
    return "cpu"
