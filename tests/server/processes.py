"""A model server in its own process, started the way SageMaker starts a container, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

import pier
from tests.sockets import free_port

SRC = str(Path(pier.__file__).resolve().parent.parent)


class ServerProcess:
    """A pier process on a loopback port with its output in a log file; stopped with SIGTERM on exit."""

    what = "server"
    verify: ssl.SSLContext | bool = True  # how wait_ready checks an https:// server's certificate

    def __init__(self, argv: list[str], port: int, log: Path, environment: dict[str, str]) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        with log.open("a") as out:
            self.process = subprocess.Popen(argv, env=environment, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text()

    def wait_ready(self, timeout: float = 60.0) -> Self:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the {self.what} exited with {self.process.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/ping", timeout=1, verify=self.verify).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"the {self.what} was not ready within {timeout} s:\n{self.output()}")

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (the process drains), then SIGKILL if it is still there after `timeout`."""
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop(30)


def pier_environment(**env: str) -> dict[str, str]:
    """This environment with pier importable from the checkout, and no AWS endpoint pointing elsewhere."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]), **env}
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"):
        environment.pop(name, None)
    return environment


class ContainerProcess(ServerProcess):
    def __init__(self, model: Path, log: Path, **env: str) -> None:
        port = free_port()
        environment = pier_environment(
            SAGEMAKER_BIND_TO_PORT=str(port), PIER_HOST="127.0.0.1", PIER_THREADS="1",
            OMP_WAIT_POLICY="passive",  # the test client shares these two cores
            PIER_LOG_LEVEL="info", **env,
        )
        super().__init__([sys.executable, "-m", "pier.server.container", "--model", str(model)], port, log,
                         environment)


def copy_metric(gateway_url: str, copy: dict[str, Any], name: str, **labels: str) -> float:
    """One sample of a copy's metrics, read through its gateway's /metrics (a copy answers only its gateway)."""
    return metric(gateway_url, name, **labels, copy=copy["copy_id"], component=copy["component"])


def metric(url: str, name: str, **labels: str) -> float:
    """One sample from the server's /metrics (0 when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(url + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return 0.0
