"""Handler workers die with their copy, even while the user's predict_fn is busy: a copy killed with SIGKILL
leaves no worker behind, and neither does a worker whose server closed the pipe while it was busy."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from pathlib import Path

import httpx

from tests.backends.conftest import alive
from tests.server.byoc.test_pool import make_model
from tests.server.processes import ContainerProcess
from tests.waiting import until

BUSY = """
    import os

    def model_fn(model_dir):
        return None

    def predict_fn(data, model):
        with open(os.environ["PIER_TEST_PID_FILE"], "w") as out:
            out.write(str(os.getpid()))
        count = 0
        while True:  # busy for good, holding the GIL between bytecodes
            count += 1
"""


def busy_worker(server: ContainerProcess, pid_file: Path) -> int:
    """Start an invocation whose predict_fn never returns; the pid of the worker running it."""
    def invoke() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the copy is killed under it
            httpx.post(server.url + "/invocations", json={"x": 1}, timeout=60)

    threading.Thread(target=invoke, daemon=True).start()
    return int(until(lambda: pid_file.exists() and pid_file.read_text(), 30, "the worker busy in predict_fn"))


def test_a_copy_killed_while_its_worker_is_busy_leaves_no_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    model = make_model(tmp_path, BUSY)
    with ContainerProcess(model, tmp_path / "log", PIER_TEST_PID_FILE=str(pid_file)) as server:
        server.wait_ready(120)
        worker = busy_worker(server, pid_file)
        try:
            server.process.send_signal(signal.SIGKILL)
            server.process.wait(10)
            until(lambda: not alive(worker), 10, "the busy worker gone with its copy")
        finally:
            if alive(worker):
                os.kill(worker, signal.SIGKILL)


def test_a_worker_whose_server_closed_the_pipe_ends_even_while_busy(tmp_path: Path) -> None:
    """The watchdog alone (the kernel's parent-death signal is not involved: the server lives on)."""
    from pier.server.byoc.worker import _watchdog

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # the "worker": a watchdog on the pipe, a main thread busy for good
        os.setsid()
        os.close(write_end)
        threading.Thread(target=_watchdog, args=(read_end, os.getppid()), daemon=True).start()
        while True:
            pass
    os.close(read_end)
    try:
        assert alive(child)
        os.close(write_end)  # the server closed its end (or died)
        until(lambda: os.waitpid(child, os.WNOHANG)[0] == child, 10, "the busy worker ended")
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)
