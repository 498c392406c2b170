"""`pier up` prints what a user needs, not a line per HTTP call; `--access-log` brings those lines back."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port

pytestmark = pytest.mark.e2e


def run_gateway(tmp_path: Path, *flags: str) -> str:
    port = free_port()
    argv = [sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir", str(tmp_path / "state"), *flags]
    with ServerProcess(argv, port, tmp_path / "gateway.log", pier_environment()) as gateway:
        gateway.wait_ready()
        for _ in range(3):
            httpx.get(gateway.url + "/ping")
        httpx.post(gateway.url, json={}, headers={"X-Amz-Target": "SageMaker.ListEndpoints",
                                                  "Content-Type": "application/x-amz-json-1.1"})
        time.sleep(0.3)
        return gateway.output()


def test_the_gateway_logs_no_call_by_default(tmp_path: Path) -> None:
    output = run_gateway(tmp_path)
    assert "pier gateway on http://127.0.0.1:" in output
    assert "GET /ping" not in output and '"POST / HTTP/1.1"' not in output


def test_access_log_switch(tmp_path: Path) -> None:
    output = run_gateway(tmp_path, "--access-log")
    assert '"GET /ping HTTP/1.1" 200' in output and '"POST / HTTP/1.1" 200' in output


def test_pier_up_and_serve_pass_the_switch_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from pier.cli import app

    seen: list[bool] = []

    def fake_run_gateway(*args: object, access_log: bool = False, **kwargs: object) -> int:
        seen.append(access_log)
        return 0

    monkeypatch.setattr("pier.gateway.run.run_gateway", fake_run_gateway)
    monkeypatch.setattr("pier.cli.serve._deploy_when_up", lambda *args: None)
    assert CliRunner().invoke(app, ["up"]).exit_code == 0
    assert CliRunner().invoke(app, ["up", "--access-log"]).exit_code == 0
    assert CliRunner().invoke(app, ["serve", "x.gguf", "--access-log"]).exit_code == 0
    assert seen == [False, True, True]
