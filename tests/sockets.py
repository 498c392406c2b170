"""Loopback ports and real uvicorn servers in a thread, shared by every test package."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: Any, lifespan: Literal["on", "off"] = "off", tls: tuple[Path, Path] | None = None) -> Iterator[str]:
    """Run `app` under a real uvicorn on a loopback port (a thread), for what only sockets show: clients
    that hang up, true streaming, a reconciler running in the lifespan. `tls`: a certificate and key to serve
    HTTPS with."""
    config = uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning", lifespan=lifespan,
                            ssl_certfile=tls[0] if tls else None, ssl_keyfile=tls[1] if tls else None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        assert thread.is_alive(), "uvicorn exited"
        time.sleep(0.01)
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(10)
