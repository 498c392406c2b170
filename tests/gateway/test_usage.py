"""Copies' CPU and memory from /proc: this test process's own, which it makes busy."""

from __future__ import annotations

import os
import time

from pier.gateway.usage import ProcessUsage, memory_total


def test_cpu_since_the_last_sample_and_resident_memory() -> None:
    usage = ProcessUsage()
    first = usage.sample([os.getpid()])
    assert first.cpu_cores == 0.0  # nothing to compare with yet
    assert 0 < first.memory_bytes < memory_total()
    ends = time.process_time() + 0.3
    while time.process_time() < ends:  # busy: at least 0.3 s of CPU
        pass
    assert usage.sample([os.getpid()]).cpu_cores > 0.0


def test_a_process_that_is_gone_counts_as_nothing() -> None:
    assert ProcessUsage().sample([2**22 + 12345]).memory_bytes == 0
