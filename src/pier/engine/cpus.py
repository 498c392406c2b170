"""How many cores this process may really use: its CPU affinity and its cgroup quota, never the host's count."""

from __future__ import annotations

import math
import os
from pathlib import Path


def usable_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """Cores the engine should run threads on: min(affinity, cgroup quota), at least 1."""
    affinity = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_limit(cgroup_root)
    return max(1, min(affinity, quota) if quota is not None else affinity)


SPARE_FROM = 8  # on this many cores or more, one is left to the process's other threads


def engine_threads(cores: int) -> int:
    """Threads for the forward pass on `cores` cores: all of them up to 7, one fewer from 8 on. The copy's event
    loop (HTTP, SSE, tokenizing) and the client beside it need a core too, and a forward-pass thread that shares one
    with them is descheduled at times; every one of the pass's barriers then waits for it. Measured on 16 cores
    (docs/benchmarks.md, "16 cores"): 15 threads served 4-15% more tokens per second than 16. On fewer cores a
    thread is worth more than the interference it avoids."""
    return cores - 1 if cores >= SPARE_FROM else cores


def cgroup_cpu_limit(root: Path) -> int | None:
    """The CPU quota as whole cores (rounded up), from cgroup v2 `cpu.max` or v1 `cpu.cfs_*`; None if unlimited."""
    v2 = root / "cpu.max"
    if v2.is_file():
        return parse_cpu_max(v2.read_text())
    quota, period = root / "cpu" / "cpu.cfs_quota_us", root / "cpu" / "cpu.cfs_period_us"
    if quota.is_file() and period.is_file():
        return parse_cfs(quota.read_text(), period.read_text())
    return None


def parse_cpu_max(text: str) -> int | None:
    """cgroup v2 `cpu.max` is "<quota> <period>" or "max <period>"."""
    parts = text.split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    return _cores(int(parts[0]), int(parts[1]))


def parse_cfs(quota_text: str, period_text: str) -> int | None:
    """cgroup v1: a quota of -1 means unlimited."""
    return _cores(int(quota_text.strip()), int(period_text.strip()))


def _cores(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))
