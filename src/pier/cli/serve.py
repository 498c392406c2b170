"""`pier container`, `pier up` and `pier serve`: running a copy, a gateway, or both at once."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import httpx
import typer
from rich.markup import escape

from pier import host_path
from pier.cli.app import app, console
from pier.cli.backend_flags import chosen_backend, with_backend_flags
from pier.cli.build_model import demo_model
from pier.control.names import ENDPOINT_NAME, NAME_HINT

if TYPE_CHECKING:
    from pier.backends.registry import BackendChoice
    from pier.client.deploy_file import DeployFile
    from pier.client.pier_client import PierClient
    from pier.security.keystore import IssuedKey, StoredKey

# uvicorn takes 99999 and listens on it modulo 65536, saying it listens on 99999
Port = Annotated[int | None, typer.Option(min=1, max=65535, help="Port to listen on (default 8080).")]
Threads = Annotated[int | None, typer.Option(help="Engine threads (default: the cores the copy may use).")]
Parallel = Annotated[int | None, typer.Option(help="Sequences decoding at once in each copy (default 8).")]
Speculate = Annotated[int | None, typer.Option(help=(
    "n-gram speculation: up to this many tokens drafted from a sequence's own history per step (TGI's SPECULATE; "
    "pays where text repeats what came before: edits, quotes, structured output). Default off."))]
StateDir = Annotated[Path | None, typer.Option(envvar="PIER_STATE_DIR",
                                                help="Where pier keeps models and state (default ~/.pier).")]
Host = Annotated[str | None, typer.Option(help=(
    "Address to listen on (default 127.0.0.1). Another address needs a key (`pier keys create`) or --insecure."))]
AllowHost = Annotated[list[str] | None, typer.Option(help=(
    "Also answer requests whose Host is this name (repeatable; '*' = any). Loopback names and IP addresses are "
    "always answered; other names are refused against DNS rebinding. Also PIER_ALLOWED_HOSTS."))]
AllowOrigin = Annotated[list[str] | None, typer.Option(help=(
    "Also trust web pages from this origin, scheme://host[:port] (repeatable); only pier's own pages are trusted "
    "otherwise, even other loopback ones (http://localhost:3000). Also PIER_ALLOWED_ORIGINS."))]
Insecure = Annotated[bool, typer.Option(help="Listen beyond loopback even with no keys: NO authentication.")]
AccessLog = Annotated[bool, typer.Option("--access-log", help="Log a line for every HTTP call to the gateway.")]
TlsCert = Annotated[Path | None, typer.Option(help=(
    "Serve HTTPS with this PEM certificate (its chain after it). Clients trust a private CA with --ca-bundle, "
    "AWS_CA_BUNDLE or SSL_CERT_FILE (docs/security.md)."))]
TlsKey = Annotated[Path | None, typer.Option(help="The certificate's PEM private key, unencrypted (chmod 600).")]


@app.command("container")
def container(
    model: Annotated[str | None, typer.Option(
        help="Model folder or .gguf (default: SM_MODEL_DIR or /opt/ml/model).")] = None,
    port: Port = None,
    host: Annotated[str | None, typer.Option(help="Address to listen on (default 0.0.0.0).")] = None,
    threads: Threads = None,
    parallel: Parallel = None,
) -> None:
    """Run one model server exactly as a SageMaker inference container does (what `<image> serve` starts)."""
    from pier.server.container import serve_container

    raise typer.Exit(serve_container(model, port, host=host, threads=threads, parallel=parallel))


GracePeriod = Annotated[float | None, typer.Option(
    "--grace-period", help="On SIGTERM/Ctrl-C, seconds requests in flight may finish (default PIER_GRACE_PERIOD_S "
                           "or 30); then they end with an error in their protocol.")]


@app.command("up")
@with_backend_flags
def up(
    port: Port = None,
    host: Host = None,
    state_dir: StateDir = None,
    allow_host: AllowHost = None,
    allow_origin: AllowOrigin = None,
    insecure: Insecure = False,
    access_log: AccessLog = False,
    grace_period: GracePeriod = None,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    backend: Annotated[str, typer.Option(help="Where copies run: local (this host) or ray (a Ray cluster).")] = "local",
    cpu_fallback: Annotated[bool, typer.Option("--cpu-fallback", help=(
        "Serve on CPU the copies that ask for GPUs this host lacks (NumberOfAcceleratorDevicesRequired, a GPU "
        "instance type); they say they run on CPU. Default: refuse them, as SageMaker refuses missing capacity."))
    ] = False,
    state_url: Annotated[str | None, typer.Option(envvar="PIER_STATE_URL", help=(
        "Keep every store (endpoints, autoscaling, sessions, the async queue, transform jobs) in this PostgreSQL "
        "database, postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE, instead of the state folder: several "
        "gateways may share it (docs/state.md)."))] = None,
    backend_flags: dict[str, Any] | None = None,  # --ray-*: from each backend's flags (pier.cli.backend_flags)
) -> None:
    """Run the gateway: the SageMaker control plane and runtime, OpenAI routes, and the copies it supervises."""
    chosen = chosen_backend(backend, backend_flags or {})
    raise typer.Exit(_run_gateway(port, host, state_dir, allow_host, insecure, access_log=access_log,
                                  grace_period=grace_period, backend=chosen, allow_origin=allow_origin,
                                  tls=(tls_cert, tls_key), cpu_fallback=cpu_fallback, state_url=state_url))


def _run_gateway(port: int | None, host: str | None, state_dir: Path | None, allow_host: list[str] | None,
                 insecure: bool, session_keys: tuple[StoredKey, ...] = (), access_log: bool = False,
                 grace_period: float | None = None, backend: BackendChoice | None = None,
                 allow_origin: list[str] | None = None, tls: tuple[Path | None, Path | None] = (None, None),
                 cpu_fallback: bool = False, state_url: str | None = None) -> int:
    from pier.gateway.run import DEFAULT_PORT, run_gateway

    return run_gateway(port or DEFAULT_PORT, state_dir, host=host or "127.0.0.1",
                       allowed_hosts=tuple(allow_host or ()), allowed_origins=tuple(allow_origin or ()),
                       insecure=insecure, session_keys=session_keys,
                       access_log=access_log, grace_period_s=grace_period, backend=backend,
                       tls_cert=tls[0], tls_key=tls[1], cpu_fallback=cpu_fallback, state_url=state_url)


@app.command("serve")
def serve(
    model: Annotated[str | None, typer.Argument(help=(
        "A .gguf file, a model folder, or a file://, s3:// or hf:// URL. Omit it to run as a SageMaker container "
        "(model from SM_MODEL_DIR or /opt/ml/model)."))] = None,
    demo: Annotated[bool, typer.Option(help="Build a small model with RANDOM weights and serve it.")] = False,
    name: Annotated[str | None, typer.Option(help="Endpoint name (default: from the model's file name).")] = None,
    port: Port = None,
    host: Host = None,
    parallel: Parallel = None,
    speculate: Speculate = None,
    state_dir: StateDir = None,
    allow_host: AllowHost = None,
    allow_origin: AllowOrigin = None,
    insecure: Insecure = False,
    access_log: AccessLog = False,
) -> None:
    """One command: a gateway, an endpoint serving MODEL on this host, and the URLs to call it."""
    if model is None and not demo:
        container(None, port, None, None, parallel)  # `<image> serve`: SageMaker's container entry
        return
    if model is not None and demo:
        raise typer.BadParameter("give a MODEL or --demo, not both", param_hint="--demo")
    if name is not None and not re.fullmatch(ENDPOINT_NAME, name):  # else pydantic's traceback, once deploying
        _refuse(f"--name {name!r} is not an endpoint name SageMaker accepts. {NAME_HINT}")
    folder = (state_dir or Path.home() / ".pier").expanduser()
    from pier.gateway.run import state_dir_problem

    if (problem := state_dir_problem(folder)) is not None:  # before the demo model is written into it
        _refuse(problem)
    source = str(demo_model(folder)) if demo else model
    assert source is not None
    endpoint = name or ("demo" if demo else endpoint_name(source))
    session = session_key()  # this process's own deploy call, should the gateway have keys
    failed = threading.Event()
    settings = {"PIER_PARALLEL": parallel, "SPECULATE": speculate}
    environment = {key: str(value) for key, value in settings.items() if value is not None}
    _deploy_when_up(endpoint, _local_source(source), (host or "127.0.0.1", port or 8080), environment, session,
                    failed)
    code = _run_gateway(port, host, folder, allow_host, insecure, (session.stored,), access_log,
                        allow_origin=allow_origin)
    raise typer.Exit(1 if failed.is_set() and code == 0 else code)  # a script must see that nothing was served


def _refuse_early(source: str, host: str, port: int) -> None:
    """Mistakes said (exit 2) before the gateway starts: a model path that is not there would leave a Failed
    endpoint of that name in the state folder, and a port in use would see the endpoint deployed on whatever
    answers there."""
    from pier.ports import port_problem

    path = _local_path(source)
    if path is not None and not path.exists():
        _refuse(f"No model at {path}: give an existing .gguf file or model folder (or an s3:// or hf:// URL).")
    if (problem := port_problem(host, port)) is not None:
        _refuse(f"cannot start: {problem}")


def _local_path(model: str) -> Path | None:
    if model.startswith("file://"):
        try:
            return host_path.of_url(model)  # decoded as the gateway decodes it when it fetches the model
        except host_path.PathRefused as error:
            _refuse(str(error))
    return None if "://" in model else Path(model).expanduser().resolve()


def _refuse(message: str) -> NoReturn:
    console.print(f"[red]error:[/] {escape(message)}")
    raise typer.Exit(2)


def endpoint_name(source: str) -> str:
    """A valid SageMaker endpoint name from a model path or URL: `qwen2.5-0.5b.Q4_0.gguf` -> `qwen2-5-0-5b-Q4-0`."""
    stem = Path(source.rstrip("/")).name.removesuffix(".gguf") or "model"
    cleaned = re.sub(r"-+", "-", re.sub(r"[^a-zA-Z0-9]", "-", stem)).strip("-")[:63].strip("-")
    return cleaned or "model"


def _local_source(source: str) -> str:
    return source if "://" in source else str(Path(source).expanduser().resolve())


def session_key() -> IssuedKey:
    from pier.security.keystore import issue
    from pier.security.principal import Role

    return issue("pier-serve", Role.ADMIN)


def _deploy_when_up(endpoint: str, source: str, listen: tuple[str, int], environment: dict[str, str],
                    session: IssuedKey, failed: threading.Event) -> None:
    """Once the gateway answers, create the endpoint (its model with `environment`) through the gateway's own API
    (with `session`, a key that lives in this process only) and print where to call it; `failed` is set when that
    failed (and the gateway stops).
    What would fail for sure is refused first, before the gateway starts."""
    from pier.client.deploy_file import DeployFile, ModelBlock
    from pier.client.pier_client import PierClient

    _refuse_early(source, *listen)
    port = listen[1]
    file = DeployFile(endpoint=endpoint, model=ModelBlock(data=source, environment=environment))
    url = f"http://127.0.0.1:{port}"

    client = PierClient(url, credentials=(session.stored.access_key_id, session.secret_access_key))
    threading.Thread(target=_deploy, args=(client, file, failed), name="pier-serve-deploy", daemon=True).start()


def _deploy(client: PierClient, file: DeployFile, failed: threading.Event) -> None:
    """`pier serve`'s deploy, on its own thread: a failure is said, sets `failed` and stops the gateway; a gateway
    that stopped under it (Ctrl-C while the endpoint was Creating) is no failure of the deploy, and says so itself."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    from pier.client.pier_client import PierClientError, refusal

    try:
        _wait_for_gateway(client)
        client.deploy(file, Path.cwd(), say=lambda line: console.print(f"  {escape(line)}"))
        _print_urls(client.url, file.endpoint)
        return
    except (EndpointConnectionError, httpx.TransportError):
        return
    except PierClientError as error:
        problem = str(error)
    except ClientError as error:
        problem = refusal(error)
    except OSError as error:
        problem = str(error)
    console.print(f"[red]Could not deploy {file.endpoint}:[/] {escape(problem)}")
    failed.set()
    os.kill(os.getpid(), signal.SIGTERM)


def _wait_for_gateway(client: PierClient, timeout_s: float = 60.0) -> None:
    from pier.client.pier_client import PierClientError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.ping()
            return
        except PierClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _print_urls(url: str, endpoint: str) -> None:
    console.print(f"\n[bold green]Endpoint {endpoint} is InService[/] at {url}")
    console.print(f"  OpenAI:     OpenAI(base_url=\"{url}/v1\", api_key=\"<an API key from `pier keys create`, or "
                  f"anything while there are no keys>\"), model=\"{endpoint}\"")
    console.print(f"  SageMaker:  AWS_ENDPOINT_URL={url}  boto3 invoke_endpoint(EndpointName=\"{endpoint}\", ...)")
    console.print(f"  HTTP:       POST {url}/endpoints/{endpoint}/invocations  (TGI, Messages or completion JSON)")
    # the CLI calls http://127.0.0.1:8080 unless told: on another port, how to tell it
    told = "" if url == "http://127.0.0.1:8080" else f"export PIER_URL={url}, then: "
    console.print(f"  CLI:        {told}pier chat {endpoint}   pier invoke {endpoint} --prompt 'Hello'   pier ls   "
                  f"pier logs {endpoint}")
    console.print("  Stop with Ctrl-C (the copies stop with the gateway).\n")
