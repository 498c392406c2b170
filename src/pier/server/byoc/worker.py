"""One handler worker process: imports the user's inference.py, runs model_fn once, then answers invocations.

The server starts it (see process.py) with `<handler.py> <model_dir> [<folder to import from> ...]` and
speaks length-prefixed frames over its stdin and stdout (frames.py). The user's functions run here, in the
worker's main thread.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import BinaryIO

from pier.server.byoc.errors import HandlerError
from pier.server.byoc.frames import Invocation, Reply, read_frame
from pier.server.byoc.toolkit import handle, load


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


def _send(stream: BinaryIO, reply: Reply) -> None:
    stream.write(reply.to_frame())
    stream.flush()


def main(argv: list[str] | None = None) -> int:
    path, model_dir, *import_path = argv or sys.argv[1:]
    prefix = f"%(asctime)s handler worker {os.getpid()} %(levelname)s"
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format=prefix + " %(name)s: %(message)s")
    frames_in, frames_out = _claim_stdio()
    try:
        handler = load(Path(path), model_dir, [Path(p) for p in import_path])
    except HandlerError as e:
        _send(frames_out, Reply(status=500, error=e.message))
        return 1
    _send(frames_out, Reply())
    while (frame := read_frame(frames_in)) is not None:
        _send(frames_out, handle(handler, Invocation.from_frame(*frame)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
