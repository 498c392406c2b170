"""One handler worker process: imports the user's inference.py, runs model_fn once, then answers invocations.

The server starts it (see worker_process.py) with `<handler.py> <model_dir> [<folder to import from> ...]` and
speaks length-prefixed frames over its stdin and stdout (frames.py). The user's functions run here, in the
worker's main thread.

A worker dies with its server, even while the user's code is busy: the kernel kills it when the server's
process ends (Linux's parent-death signal), and a watchdog thread ends it (and whatever it started in its
process group) when the server closes the pipe or goes away, should the main thread not get to read the EOF.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO

from pier.env import Env, integer
from pier.server.byoc.errors import HandlerError
from pier.server.byoc.toolkit import handle, load
from pier.server.byoc.worker_frames import PARENT_ENV, WorkerReply, WorkerRequest, read_frame


def _claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """Keep stdin/stdout for frames and point fds 0 and 1 away: a print() in the user's code, or
    llama.cpp writing to stdout, must land in the log, never inside the protocol."""
    frames_in = os.fdopen(os.dup(0), "rb")
    frames_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return frames_in, frames_out


PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
ORPHANED = 70  # exit status when the server was gone before the worker could watch it
EOF_GRACE_S = 1.0  # after the server closed the pipe, how long an idle main loop gets to exit on its own


def _die_with_server(frames_in: BinaryIO) -> None:
    """SIGKILL from the kernel when the server's process ends, and a watchdog for the rest."""
    parent = Env().get(PARENT_ENV, cast=integer(), default=os.getppid())  # what the server set for it
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the server died before the signal was armed: nobody would send it
        os._exit(ORPHANED)
    threading.Thread(target=_watchdog, args=(frames_in.fileno(), parent), name="pier-worker-watchdog",
                     daemon=True).start()


def _watchdog(fd: int, parent: int) -> None:
    """End this worker's process group once the server is gone: its end of the pipe closed (seen as a hang-up
    even while the main thread is busy in the user's code), or this process was handed to another parent."""
    poller = select.poll()
    poller.register(fd, select.POLLHUP | select.POLLERR)
    while True:
        hung_up = any(event & (select.POLLHUP | select.POLLERR) for _, event in poller.poll(500))
        if hung_up or os.getppid() != parent:
            break
    time.sleep(EOF_GRACE_S)  # an idle worker reads the EOF and exits cleanly meanwhile
    logging.getLogger(__name__).warning("the server is gone; ending this worker")
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)  # its own group: worker_process.py starts it in a new session
    finally:
        os._exit(ORPHANED)


def _send(stream: BinaryIO, reply: WorkerReply) -> None:
    stream.write(reply.to_frame())
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    path, model_dir, *import_path = argv or sys.argv[1:]
    prefix = f"%(asctime)s handler worker {os.getpid()} %(levelname)s"
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=prefix + " %(name)s: %(message)s")
    frames_in, frames_out = _claim_stdio()
    _die_with_server(frames_in)
    try:
        handler = load(Path(path), model_dir, [Path(p) for p in import_path])
    except HandlerError as e:
        _send(frames_out, WorkerReply(status=500, error=e.message))
        return 1
    _send(frames_out, WorkerReply())
    while (frame := read_frame(frames_in)) is not None:
        _send(frames_out, handle(handler, WorkerRequest.from_frame(*frame)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
