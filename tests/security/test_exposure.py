"""Listening beyond loopback: refused without keys (unless --insecure), as a real `pier up` process does it."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.security.exposure import Door, door, exposure_problem, exposure_warning, why_shut
from pier.security.keystore import KeyStore
from pier.security.principal import Role
from tests.server.processes import ServerProcess, pier_environment
from tests.sockets import free_port


@pytest.mark.parametrize(
    ("host", "has_keys", "insecure", "outcome"),
    [("127.0.0.1", False, False, "serve"), ("localhost", False, False, "serve"), ("::1", False, True, "serve"),
     ("0.0.0.0", False, False, "refuse"), ("::", False, False, "refuse"), ("192.168.1.5", False, False, "refuse"),
     ("0.0.0.0", True, False, "serve"), ("0.0.0.0", True, True, "serve"), ("0.0.0.0", False, True, "warn")],
)
def test_exposure(host: str, has_keys: bool, insecure: bool, outcome: str) -> None:
    problem = exposure_problem(host, has_keys, insecure)
    warning = exposure_warning(host, has_keys, insecure)
    assert {"serve": (None, None), "refuse": (problem, None), "warn": (None, warning)}[outcome] == (problem, warning)
    if problem:
        assert "pier keys create" in problem and "--insecure" in problem


def test_pier_up_on_every_interface_without_keys_refuses_to_start(tmp_path: Path) -> None:
    """The process exits at once with the reason, before it binds anything."""
    gateway = [sys.executable, "-m", "pier.gateway", "--host", "0.0.0.0", "--port", str(free_port()),
               "--state-dir", str(tmp_path / "state")]
    finished = subprocess.run(gateway, env=pier_environment(), capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "without keys" in finished.stderr and "pier keys create" in finished.stderr
    assert "--insecure" in finished.stderr


def test_the_cli_refuses_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="pier.gateway")
    result = CliRunner().invoke(app, ["up", "--host", "0.0.0.0", "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "pier keys create" in caplog.text


@pytest.mark.parametrize("how", ["with a key", "--insecure"])
def test_it_starts_with_a_key_or_when_told_it_is_insecure(tmp_path: Path, how: str) -> None:
    state = tmp_path / "state"
    if how == "with a key":
        KeyStore.in_state_dir(state).create("admin", Role.ADMIN)
    port = free_port()
    argv = [sys.executable, "-m", "pier.gateway", "--host", "0.0.0.0", "--port", str(port), "--state-dir", str(state)]
    if how == "--insecure":
        argv.append("--insecure")
    with ServerProcess(argv, port, tmp_path / "gateway.log", pier_environment()) as gateway:
        gateway.wait_ready()
        assert httpx.get(f"{gateway.url}/ping", headers={"Host": "evil.example"}).status_code == 403
        assert ("WITHOUT authentication" in gateway.output()) is (how == "--insecure")


def test_a_damaged_key_file_stops_the_gateway_from_starting(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from pier.security.exposure import may_listen

    (tmp_path / "keys.json").write_text("{not json")
    assert not may_listen(tmp_path, "127.0.0.1", insecure=False)
    assert "not a pier key file" in caplog.text


@pytest.mark.parametrize(
    ("host", "insecure", "keys", "valid", "entry"),
    [
        # the laptop default: loopback with no key at all needs none
        ("127.0.0.1", False, 0, 0, Door.OPEN),
        ("localhost", False, 0, 0, Door.OPEN),
        ("::1", False, 0, 0, Door.OPEN),
        # a valid key anywhere turns keys on
        ("127.0.0.1", False, 1, 1, Door.KEYED),
        ("0.0.0.0", False, 2, 1, Door.KEYED),
        ("0.0.0.0", True, 1, 1, Door.KEYED),
        # beyond loopback with no key (revoked, keys.json deleted or emptied): shut, not open
        ("0.0.0.0", False, 0, 0, Door.SHUT),
        ("::", False, 0, 0, Door.SHUT),
        ("192.168.1.5", False, 0, 0, Door.SHUT),
        ("127.0.0.2", False, 0, 0, Door.OPEN),  # 127.0.0.0/8 is loopback
        # --insecure is the operator's explicit "no authentication beyond loopback"
        ("0.0.0.0", True, 0, 0, Door.OPEN),
        # keys that all expired never open anything, wherever it listens
        ("127.0.0.1", False, 1, 0, Door.SHUT),
        ("0.0.0.0", True, 2, 0, Door.SHUT),
    ],
)
def test_door(host: str, insecure: bool, keys: int, valid: int, entry: Door) -> None:
    assert door(host, insecure, keys, valid) is entry


def test_why_shut_says_what_happened() -> None:
    assert "0.0.0.0, beyond loopback" in why_shut("0.0.0.0", 0) and "revoked" in why_shut("0.0.0.0", 0)
    assert "2 key(s) has expired" in why_shut("127.0.0.1", 2)
