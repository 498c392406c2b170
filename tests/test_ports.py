"""Whether a process can listen where it was told to, asked before it starts anything (pier.ports)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pier.ports import port_problem
from pier.server.container import serve_container
from tests.sockets import free_port


def test_a_free_port_has_no_problem_and_a_taken_one_says_what_to_do() -> None:
    port = free_port()
    assert port_problem("127.0.0.1", port) is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        assert port_problem("127.0.0.1", port) == (
            f"127.0.0.1:{port} is in use (another pier gateway, or another server): stop it or pass another --port.")


def test_an_address_this_host_does_not_have_is_named() -> None:
    problem = port_problem("192.0.2.1", free_port())  # TEST-NET-1: never this host's
    assert problem is not None and "cannot listen on 192.0.2.1" in problem and "--host" in problem


def test_a_copy_on_a_taken_port_stops_before_it_loads_its_model(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """Before: the whole model was loaded, then uvicorn could not bind (exit 3). Now it exits 1 at once, and the
    model (here a file that is not one) is never read."""
    (tmp_path / "model.gguf").write_bytes(b"not a model")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_container(str(tmp_path), port, host="127.0.0.1", env={}) == 1
    assert f"127.0.0.1:{port} is in use" in caplog.text
