"""A `pier up` gateway in its own process (`python -m pier.gateway`), for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from tests.server.processes import SRC


class GatewayProcess:
    def __init__(self, state_dir: Path, port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.env = env
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
            "OMP_WAIT_POLICY": "passive",  # the copies share two cores with the tests
            **(env or {}),
        }
        for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
            environment.pop(name, None)
        with log.open("a") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir", str(state_dir)],
                env=environment, stdout=out, stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 30.0) -> GatewayProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the gateway exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/ping", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"the gateway was not ready within {timeout} s:\n{self.output()}")

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: the gateway stops its copies (each drains) and exits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
