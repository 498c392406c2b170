"""Whether a process can listen where it was told to, asked before it starts anything: uvicorn finds out only after
its app's start-up (a gateway's, or a copy's model load), and meanwhile `pier serve` would deploy its endpoint on
whatever answers at that port, or a copy would load a model it cannot serve."""

from __future__ import annotations

import errno
import socket


def port_problem(host: str, port: int) -> str | None:
    """Why nothing could listen on host:port now, if it could not."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is free
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return f"{host}:{port} is in use (another pier gateway, or another server): stop it or pass another --port."
        return f"cannot listen on {host}:{port}: {error.strerror or error}; pass another --host or --port."
    return None
