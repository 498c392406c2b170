"""CPU and memory of copies' processes on this host, from /proc, for the utilization metrics autoscaling
records (CPUUtilization, MemoryUtilization). Only the local backend's copies run here: a copy elsewhere (Ray)
has a pid on another machine, and is not read."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pier.control.instance_types import host_memory_mb

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
FORGET_S = 300.0


@dataclass(frozen=True)
class Usage:
    cpu_cores: float  # cores busy on average since the last sample (1.0 = one core all the time)
    memory_bytes: int  # resident memory now


def memory_total() -> int:
    """This host's memory in bytes, as instance types count it (`control.instance_types.host_memory_mb`)."""
    return host_memory_mb() * 2**20


class ProcessUsage:
    def __init__(self, proc: Path = PROC, clock: Callable[[], float] = time.monotonic) -> None:
        self.proc = proc
        self.clock = clock
        self._last: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, when)

    def sample(self, pids: Iterable[int]) -> Usage:
        """The processes' CPU since each one's last sample (a pid seen for the first time counts from now) and
        their resident memory; a process that is gone counts as nothing."""
        cores, memory, now = 0.0, 0, self.clock()
        for pid in pids:
            read = self._read(pid)
            if read is None:
                continue
            cpu, rss = read
            memory += rss
            last = self._last.get(pid)
            if last is not None and now > last[1]:
                cores += max(0.0, cpu - last[0]) / (now - last[1])
            self._last[pid] = (cpu, now)
        for gone in [pid for pid, (_, when) in self._last.items() if now - when > FORGET_S]:
            del self._last[gone]  # a copy stopped long ago
        return Usage(cores, memory)


    def _read(self, pid: int) -> tuple[float, int] | None:
        try:
            stat = (self.proc / str(pid) / "stat").read_text()
            statm = (self.proc / str(pid) / "statm").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        cpu = (int(fields[11]) + int(fields[12])) / TICKS_PER_S  # utime and stime
        return cpu, int(statm.split()[1]) * PAGE_BYTES
