"""Running the gateway as a process: `pier up` and `python -m pier.gateway`."""

from __future__ import annotations

import logging
from pathlib import Path

import uvicorn

from pier.gateway.app import create_gateway
from pier.gateway.drain import DrainingServer, grace_period

log = logging.getLogger("pier.gateway")

DEFAULT_STATE_DIR = Path.home() / ".pier"
DEFAULT_PORT = 8080


def run_gateway(port: int = DEFAULT_PORT, state_dir: Path | None = None, *, host: str = "127.0.0.1",
                log_level: str = "info", grace_period_s: float | None = None) -> int:
    """Serve the gateway until SIGINT/SIGTERM, which drain: requests in flight get `grace_period_s` (default
    PIER_GRACE_PERIOD_S or 30 s) to finish, then end in their protocol; every copy is stopped on the way out."""
    try:
        grace_s = grace_period(grace_period_s)
    except ValueError as error:
        logging.basicConfig(level=log_level.upper())
        log.error("cannot start: %s", error)
        return 2
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per health check otherwise
    folder = (state_dir or DEFAULT_STATE_DIR).expanduser()
    app = create_gateway(folder)
    log.info("pier gateway on http://%s:%d (state in %s)", host, port, folder)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    DrainingServer(config, app.state.drain, grace_s).run()
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
    parser.add_argument("--grace-period", type=float, default=None, metavar="SECONDS",
                        help="on SIGTERM/Ctrl-C, how long requests in flight may finish (default "
                             "PIER_GRACE_PERIOD_S or 30)")
    args = parser.parse_args(argv)
    return run_gateway(args.port, args.state_dir, host=args.host, log_level=args.log_level,
                       grace_period_s=args.grace_period)
