"""A model server in its own process, started the way SageMaker starts a container, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

import pier
from tests.sockets import free_port

SRC = str(Path(pier.__file__).resolve().parent.parent)


class ContainerProcess:
    def __init__(self, model: Path, log: Path, **env: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
            "SAGEMAKER_BIND_TO_PORT": str(self.port),
            "PIER_HOST": "127.0.0.1",
            "PIER_THREADS": "1",
            "OMP_WAIT_POLICY": "passive",  # the test client shares these two cores
            "PIER_LOG_LEVEL": "info",
            **env,
        }
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pier.server.container", "--model", str(model)],
                env=environment, stdout=out, stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 60.0) -> ContainerProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/ping", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"the server was not ready within {timeout} s:\n{self.output()}")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def __enter__(self) -> ContainerProcess:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def metric(url: str, name: str, **labels: str) -> float:
    """One sample from the server's /metrics (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0
