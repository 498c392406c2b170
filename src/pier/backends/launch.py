"""The first moments of a copy's process, before it becomes the model server.

`python -m pier.backends.launch --parent PID [--cores 0,1] -- COMMAND...` asks the kernel to kill this
process when its parent dies (so a gateway that crashes or is killed leaves no orphaned copies), pins it
to its cores, then replaces itself with COMMAND: the pid, the death signal and the affinity carry over.
Done here rather than in a `preexec_fn`, which is unsafe in a parent that runs threads.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
from collections.abc import Sequence

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
ORPHANED = 70  # exit code when the parent died before the death signal was armed


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the thread that started it exits. Linux only; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the signal was armed: nobody would send it
        os._exit(ORPHANED)


def parse_cores(text: str) -> set[int]:
    return {int(core) for core in text.split(",") if core.strip()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m pier.backends.launch", description=__doc__)
    parser.add_argument("--parent", type=int, required=True, help="the pid expected to be this process's parent")
    parser.add_argument("--cores", default="", help="CPU ids to pin to, comma-separated (default: no pinning)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the program and its arguments")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    die_with_parent(args.parent)
    cores = parse_cores(args.cores)
    if cores:
        try:
            os.sched_setaffinity(0, cores)
        except OSError as error:
            sys.exit(f"pier: cannot pin the copy to cores {sorted(cores)} ({error}); this host lets it use "
                     f"{sorted(os.sched_getaffinity(0))}. Change the component's core placement.")
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
