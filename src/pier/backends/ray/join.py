"""Joining a Ray cluster that may not be ready yet.

A gateway often starts beside its cluster (one `kubectl apply` brings up the KubeRay head and the gateway's pod),
and a head that is still starting refuses connections, or its Ray Client proxy fails to start the per-client
server it hands each driver. Failing the gateway on the first refusal turns a few seconds of start-up into a crash
loop; so joining is tried again with a growing pause until `join_wait_s` has passed, and only then reported. An
address Ray cannot parse is reported at once: waiting does not fix it.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from pier.backends.ray.config import RayConfig

log = logging.getLogger("pier.backends.ray")

FIRST_PAUSE_S = 1.0
LONGEST_PAUSE_S = 10.0
PROBE_S = 5.0  # a head that does not take a TCP connection in this long is not up (yet)


@dataclass(frozen=True)
class Attempts:
    """How long to keep trying; the clock and the sleep are parameters so that tests run in no time."""

    wait_s: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def pauses(wait_s: float) -> list[float]:
    """The pauses between attempts: doubling from FIRST_PAUSE_S up to LONGEST_PAUSE_S, while they fit in wait_s."""
    out: list[float] = []
    pause, spent = FIRST_PAUSE_S, 0.0
    while spent + pause <= wait_s:
        out.append(pause)
        spent += pause
        pause = min(pause * 2, LONGEST_PAUSE_S)
    return out


def driver_options(config: RayConfig) -> dict[str, Any]:
    """ray.init's keyword arguments for the gateway's driver. A driver lives and dies with the raylet it attaches
    to, and Ray attaches it to the head's when this host runs the head: `node_ip_address` picks another raylet on
    this host (one started with `ray start --node-ip-address`), so that the gateway outlives a head restart."""
    options: dict[str, Any] = {"namespace": config.namespace, "logging_level": logging.WARNING,
                               "log_to_driver": False}
    if config.node_ip_address is not None:
        options["_node_ip_address"] = config.node_ip_address
    return options


def join(init: Callable[[], None], reset: Callable[[], None], address: str, attempts: Attempts) -> None:
    """Call `init` until it succeeds or `attempts.wait_s` has passed (counting the attempts' own time); `reset`
    undoes a failed attempt's half-made connection. Raises the last error; a ValueError (the address) at once."""
    deadline = attempts.clock() + attempts.wait_s
    planned = iter(pauses(attempts.wait_s))
    while True:
        try:
            init()
            return
        except ValueError:
            raise
        except (ConnectionError, RuntimeError) as error:
            reset()
            pause = next(planned, None)
            if pause is None or attempts.clock() + pause > deadline:
                raise
            log.warning("the Ray cluster at %s did not take this gateway yet (%s); trying again in %.0f s "
                        "(join_wait_s in --ray-config bounds the wait)", address, _cause(error), pause)
            attempts.sleep(pause)


def probe(address: str, timeout_s: float = PROBE_S) -> None:
    """ConnectionError unless something takes a TCP connection at the address's host and port. ray.init on a GCS
    address that nothing answers blocks for minutes, retrying inside Ray, and Ray Client waits 30 s: a probe lets
    an absent head fail the attempt in seconds, so join_wait_s bounds the whole wait. "auto" (a cluster found
    through this host's Ray files) has nothing to probe."""
    host, port = _host_port(address)
    if host is None or port is None:
        return
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as error:
        raise ConnectionError(f"nothing takes connections at {host}:{port} ({error})") from None


def _host_port(address: str) -> tuple[str | None, int | None]:
    if address in ("", "auto", "local"):
        return None, None
    try:
        parts = urlsplit(address if "://" in address else f"gcs://{address}")
        return parts.hostname, parts.port
    except ValueError:  # Ray says what is wrong with it
        return None, None


def _cause(error: BaseException) -> str:
    """The error in one line: its message, or the last line of a traceback Ray Client passes on (the cause)."""
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if len(lines) > 1 else lines[0] if lines else type(error).__name__)[:300]
