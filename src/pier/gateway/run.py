"""Running the gateway as a process: `pier up` and `python -m pier.gateway`."""

from __future__ import annotations

import argparse
import gc
import logging
import subprocess
import sys
import threading
from pathlib import Path

import uvicorn

from pier.backends.registry import FLAGS, LOCAL, NAMES, BackendChoice, choose
from pier.control.backups import GatewayLock
from pier.errors import PierError
from pier.gateway import listening, state_files
from pier.gateway.app import create_gateway
from pier.gateway.drain import DrainingServer
from pier.gateway.key_table import keys_in
from pier.gateway.settings import GatewaySettings
from pier.gpus import discover, gpu_build_advice
from pier.ports import port_problem
from pier.security.exposure import may_listen
from pier.security.keystore import StoredKey
from pier.security.tls import TlsError, TlsFiles, plain_http_warning, tls_files

log = logging.getLogger("pier.gateway")

DEFAULT_STATE_DIR = Path.home() / ".pier"
DEFAULT_PORT = 8080
STATE_UNUSABLE = 3  # exit code when the gateway cannot start on its state folder (damaged, too new, in use)


def log_host_kernels() -> None:
    """The host's CPU flags and llama.cpp build's features in the log, for the copies' figures. Read by a child
    process on a thread of its own: the gateway never loads llama.cpp (tests/gateway/test_imports.py), nor waits."""

    def read() -> None:
        try:
            done = subprocess.run([sys.executable, "-m", "pier.engine.kernels"], capture_output=True, text=True,
                                  timeout=60, check=True)
            log.info("CPU kernels for copies: %s (each copy proves them on its model: /pier/copies)",
                     done.stdout.strip())
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("could not read this host's CPU kernels (%s); copies still prove theirs", error)

    threading.Thread(target=read, name="pier-host-kernels", daemon=True).start()


def run_gateway(port: int = DEFAULT_PORT, state_dir: Path | None = None, *, host: str = "127.0.0.1",
                log_level: str = "info", allowed_hosts: tuple[str, ...] = (), allowed_origins: tuple[str, ...] = (),
                insecure: bool = False,
                session_keys: tuple[StoredKey, ...] = (), access_log: bool = False,
                grace_period_s: float | None = None, backend: BackendChoice | None = None,
                tls_cert: Path | None = None, tls_key: Path | None = None, cpu_fallback: bool = False,
                state_url: str | None = None) -> int:
    """Serve the gateway until SIGINT/SIGTERM, which drain: requests in flight get `grace_period_s` (default
    PIER_GRACE_PERIOD_S or 30 s) to finish, then end in their protocol; every copy is stopped on the way out (on a
    Ray cluster that is not the gateway's own, copies stay for the next gateway: see pier.backends.ray).
    Copies run on `backend` (default local). The environment is read here, once (GatewaySettings: 2 when a value
    cannot be used). Refuses (2) to listen beyond loopback without keys unless `insecure`. Its log says what a user
    needs (where it listens, endpoints changing status, copies failing); `access_log` adds a line per call. With
    `tls_cert` (and `tls_key`) it serves HTTPS only; the files are checked (2 when they cannot be served) before
    anything starts."""
    chosen = backend or choose(LOCAL.name)
    try:
        settings = GatewaySettings.from_env(
            grace_period_s=grace_period_s, cpu_fallback=cpu_fallback, bind_host=host, allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins, session_keys=session_keys, insecure=insecure, state_url=state_url)
        tls = tls_files(tls_cert, tls_key)
    except (ValueError, TlsError) as error:
        logging.basicConfig(level=log_level.upper())
        log.error("cannot start: %s", error)
        return 2
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per health check otherwise
    if (problem := port_problem(host, port)) is not None:
        log.error("cannot start: %s", problem)
        return 2
    folder = (state_dir or DEFAULT_STATE_DIR).expanduser()
    if (problem := state_dir_problem(folder)) is not None:
        log.error("cannot start: %s", problem)
        return 2
    try:  # before keys decide where it may listen: a key file that does not read is refused with its fix
        state_files.refuse_damaged(folder)
        with keys_in(settings.state_url, folder) as keys:  # the database's keys, with --state-url
            listen = may_listen(folder, host, insecure, keys)
    except PierError as error:
        log.error("%s", error.message)
        return STATE_UNUSABLE
    if not listen:
        return 2
    lock = None
    try:  # one gateway per state folder; a damaged state is refused, never replaced (`pier state` mends it)
        lock = GatewayLock.take(folder)
        listening.record(folder, host, port, insecure)  # for `pier keys revoke` to say what the last revoke does
        copies_on = chosen.open(folder)  # the ray backend joins its cluster here, before the gateway serves
        gpus = discover()
        app = create_gateway(folder, settings=settings, backend=copies_on, gpus=gpus)
    except PierError as error:
        if lock is not None:
            lock.release()
        log.error("%s", error.message)
        return STATE_UNUSABLE
    except (ValueError, RuntimeError) as error:  # an unknown backend, a bad Ray config, no Ray, no cluster
        if lock is not None:
            lock.release()
        log.error("%s", error)
        return 2
    origin = gateway_origin(host, port, tls)
    if (warning := plain_http_warning(host, tls)) is not None:
        log.warning("%s", warning)
    for warning in tls.warnings if tls else ():  # a certificate not valid yet, a key others may read
        log.warning("%s", warning)
    log.info("pier gateway on %s (state in %s, copies on the %s backend)", origin, folder, chosen.kind.name)
    log.info("web console: %s/console", origin)
    if chosen.kind.capabilities.local_processes:
        log.info("GPUs for copies: %s (%s)%s", gpus.describe(), gpus.source,
                 "; copies asking for GPUs it lacks run on CPU (--cpu-fallback)" if cpu_fallback else "")
        if (advice := gpu_build_advice(gpus)) is not None:
            log.warning("%s", advice)
        log_host_kernels()
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5,
                            access_log=access_log, ssl_certfile=tls.cert if tls else None,
                            ssl_keyfile=tls.key if tls else None)
    # What start-up made (botocore's service models, pydantic's validators, the routes) lives as long as the
    # process: kept out of the garbage collector's full passes, which would otherwise scan it all and hold the
    # event loop for tens of milliseconds whenever requests allocate much (the largest PutMetricData calls).
    gc.collect()
    gc.freeze()
    try:
        DrainingServer(config, app.state.drain, settings.grace_s).run()
    finally:
        lock.release()
    return 0


def state_dir_problem(folder: Path) -> str | None:
    """A state folder that is a file: every store would fail on its first file with NotADirectoryError."""
    if folder.exists() and not folder.is_dir():
        return f"--state-dir {folder} is a file: give a folder (it is made when missing)."
    return None


def gateway_origin(host: str, port: int, tls: TlsFiles | None) -> str:
    """Where clients reach the gateway: `https://` when it serves TLS (an IPv6 address in brackets)."""
    name = f"[{host}]" if ":" in host else host
    return f"{'https' if tls is not None else 'http'}://{name}:{port}"


def arguments() -> argparse.ArgumentParser:
    """`python -m pier.gateway`'s options (a manifest's command line can be checked against them)."""
    parser = argparse.ArgumentParser(
        prog="python -m pier.gateway",
        description="The pier gateway (`pier up`): SageMaker control plane, runtime and OpenAI on one port.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state-dir", type=Path, default=None, help=f"default {DEFAULT_STATE_DIR}")
    parser.add_argument("--state-url", default=None, metavar="URL",
                        help="keep every store in this PostgreSQL database (postgresql://…; default PIER_STATE_URL, "
                             "else the state folder's files)")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--grace-period", type=float, default=None, metavar="SECONDS",
                        help="on SIGTERM/Ctrl-C, how long requests in flight may finish (default "
                             "PIER_GRACE_PERIOD_S or 30)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this Host name (repeatable; '*' = any)")
    parser.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                        help="also trust browser pages from this origin, scheme://host[:port] (repeatable)")
    parser.add_argument("--insecure", action="store_true",
                        help="listen beyond loopback even without keys (no authentication)")
    parser.add_argument("--access-log", action="store_true", help="log a line for every HTTP call")
    parser.add_argument("--tls-cert", type=Path, default=None, metavar="FILE",
                        help="serve HTTPS with this PEM certificate (chain: leaf first)")
    parser.add_argument("--tls-key", type=Path, default=None, metavar="FILE",
                        help="the certificate's PEM private key (unencrypted)")
    parser.add_argument("--backend", choices=NAMES, default=LOCAL.name, help="where copies run (default local)")
    parser.add_argument("--cpu-fallback", action="store_true",
                        help="serve on CPU the copies that ask for GPUs this host lacks (default: refuse them)")
    for flag in FLAGS:  # each backend's (pier.backends.registry)
        parser.add_argument(flag.option, type=flag.type, default=None, help=flag.help)
    return parser


def main(argv: list[str] | None = None) -> int:
    """`python -m pier.gateway`: what `pier up` runs."""
    parser = arguments()
    args = parser.parse_args(argv)
    try:
        backend = choose(args.backend, {flag.key: getattr(args, flag.parameter) for flag in FLAGS})
    except ValueError as error:
        parser.error(str(error))
    return run_gateway(args.port, args.state_dir, host=args.host, log_level=args.log_level,
                       allowed_hosts=tuple(args.allow_host), allowed_origins=tuple(args.allow_origin),
                       insecure=args.insecure, access_log=args.access_log,
                       grace_period_s=args.grace_period, backend=backend, tls_cert=args.tls_cert,
                       tls_key=args.tls_key, cpu_fallback=args.cpu_fallback, state_url=args.state_url)
