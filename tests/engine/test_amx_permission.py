"""The seccomp filter that refuses AMX's tile permission to one process, and only that."""

from __future__ import annotations

import multiprocessing
import platform

import pytest

from pier.engine import amx_permission
from pier.engine.amx_permission import EPERM, filter_program

x86_linux = pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64",
                               reason="AMX and this filter exist on x86-64 Linux only")


def test_every_jump_of_the_filter_lands_on_a_return() -> None:
    rows = filter_program()
    for index, (code, if_true, if_false, _) in enumerate(rows):
        if code == 0x15:  # a conditional jump
            for target in (index + 1 + if_true, index + 1 + if_false):
                assert rows[target][0] in (0x06, 0x20)
    assert rows[-1] == (0x06, 0, 0, amx_permission.SECCOMP_RET_ALLOW)


def _refused_then_asked(results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    before = amx_permission.tile_permission_errno()
    amx_permission.refuse_amx()
    with open("/proc/self/status") as status:  # other system calls still go through
        seccomp = next(line for line in status if line.startswith("Seccomp:"))
    results.put((before, amx_permission.tile_permission_errno(), seccomp.split()[1]))


@x86_linux
def test_a_refused_process_is_told_eperm_and_keeps_every_other_call() -> None:
    results: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()  # type: ignore[type-arg]
    child = multiprocessing.get_context("spawn").Process(target=_refused_then_asked, args=(results,))
    child.start()
    before, after, mode = results.get(timeout=30)
    child.join(30)
    assert child.exitcode == 0
    assert after == EPERM and before != EPERM  # 0 on an AMX host, EOPNOTSUPP or EINVAL elsewhere
    assert mode == "2"  # SECCOMP_MODE_FILTER
    assert amx_permission.tile_permission_errno() == before  # this process was never filtered
