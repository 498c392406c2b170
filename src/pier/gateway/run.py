"""Running the gateway as a process: `pier up` and `python -m pier.gateway`."""

from __future__ import annotations

import logging
from pathlib import Path

import uvicorn

from pier.gateway.app import create_gateway

log = logging.getLogger("pier.gateway")

DEFAULT_STATE_DIR = Path.home() / ".pier"
DEFAULT_PORT = 8080


def run_gateway(port: int = DEFAULT_PORT, state_dir: Path | None = None, *, host: str = "127.0.0.1",
                log_level: str = "info", access_log: bool = False) -> int:
    """Serve the gateway until SIGINT/SIGTERM; every copy is stopped on the way out. Its log says what a user
    needs (where it listens, endpoints changing status, copies failing); `access_log` adds a line per call."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per health check otherwise
    folder = (state_dir or DEFAULT_STATE_DIR).expanduser()
    app = create_gateway(folder)
    log.info("pier gateway on http://%s:%d (state in %s)", host, port, folder)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5, access_log=access_log)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m pier.gateway`: what `pier up` runs."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m pier.gateway",
        description="The pier gateway (`pier up`): SageMaker control plane, runtime and OpenAI on one port.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state-dir", type=Path, default=None, help=f"default {DEFAULT_STATE_DIR}")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--access-log", action="store_true", help="log a line for every HTTP call")
    args = parser.parse_args(argv)
    return run_gateway(args.port, args.state_dir, host=args.host, log_level=args.log_level,
                       access_log=args.access_log)
