"""Servers to benchmark: pier's model server on a TINY GGUF in its own process, and small broken servers."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

import pier
from tests.sockets import free_port

SRC = str(Path(pier.__file__).resolve().parent.parent)
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0




@pytest.fixture(scope="module")
def pier_server(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m pier.server.container` serving the TINY model on a free loopback port, one engine thread."""
    port = free_port()
    log = tmp_path_factory.mktemp("bench-server") / "server.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
        "PIER_THREADS": "1",
        "OMP_WAIT_POLICY": "passive",
    }  # the benchmark client shares these two cores
    command = [
        sys.executable,
        "-m",
        "pier.server.container",
        "--model",
        str(tiny_gguf),
        "--port",
        str(port),
        "--host",
        "127.0.0.1",
    ]
    with log.open("w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, url, log)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the model server exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/ping", timeout=1).status_code == httpx.codes.OK:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"the model server was not ready within {READY_TIMEOUT_S} s:\n{log.read_text()}")


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A plain HTTP server on a loopback port in a thread, for answers no real LLM server gives on purpose."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STOP_TIMEOUT_S)
