"""The `pier up` process: one port that speaks the SageMaker control plane (`POST /` with
`X-Amz-Target: SageMaker.<Operation>`), the SageMaker runtime (`/endpoints/{name}/invocations[-response-stream]`)
and OpenAI (`/v1/chat/completions`, `/v1/completions`, `/v1/models`), so code written for SageMaker works
with only `AWS_ENDPOINT_URL` changed.

Everything the gateway knows lives in `<state_dir>/state.sqlite3`; model files in `<state_dir>/models`.
A restarted gateway reads its state and the reconciler starts every copy again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from pier.backends.base import Backend
from pier.control.api import ControlPlane
from pier.control.errors import ControlError, SerializationError, UnknownOperation
from pier.control.fetches import Fetches
from pier.control.model_store import ModelStore
from pier.control.names import region_of
from pier.control.reconciler import Reconciler
from pier.control.state import State
from pier.control.targets import Targets
from pier.runtime.invoke import RuntimeService
from pier.runtime.routes import openai_router, runtime_router
from pier.security.exposure import may_listen
from pier.security.install import install_security
from pier.security.keystore import StoredKey
from pier.security.scope import endpoint_of_state
from pier.security.settings import SecuritySettings

log = logging.getLogger("pier.gateway")

AMZ_JSON = "application/x-amz-json-1.1"
REQUEST_ID = "x-amzn-RequestId"
DEFAULT_STATE_DIR = Path.home() / ".pier"
DEFAULT_PORT = 8080


@dataclass
class Gateway:
    """The parts of a running gateway, on `app.state.gateway`."""

    state: State
    backend: Backend
    reconciler: Reconciler
    control: ControlPlane
    targets: Targets
    runtime: RuntimeService


def create_gateway(state_dir: Path, *, backend: Backend | None = None, tick_s: float = 1.0,
                   store: ModelStore | None = None, security: SecuritySettings | None = None) -> FastAPI:
    """The gateway app over the state in `state_dir`; its lifespan runs the reconciler and, on the way out,
    stops every copy. Every request passes pier.security's guard first (Host/Origin, keys, roles, audit)."""
    gateway = _assemble(state_dir, backend or _local_backend(state_dir), tick_s, store)
    app = FastAPI(title="pier gateway", lifespan=_lifespan(gateway))
    app.state.gateway = gateway
    app.add_api_route("/", _control_route, methods=["POST"], response_model=None, include_in_schema=False)
    app.add_api_route("/ping", _ping, methods=["GET"], response_model=None)
    app.add_api_route("/v1/models", _openai_models, methods=["GET"], response_model=None)
    app.add_api_route("/pier/copies", _copies, methods=["GET"], response_model=None)
    app.add_api_route("/pier/copies/{copy_id}/logs", _copy_logs, methods=["GET"], response_model=None)
    app.include_router(runtime_router(gateway.runtime))
    app.include_router(openai_router(gateway.runtime))
    install_security(app, state_dir, security or SecuritySettings.from_env(),  # pier.security: see docs/security.md
                     endpoint_of=endpoint_of_state(gateway.state),
                     max_body_bytes=gateway.runtime.settings.max_payload_bytes)
    return app


def run_gateway(port: int = DEFAULT_PORT, state_dir: Path | None = None, *, host: str = "127.0.0.1",
                log_level: str = "info", allowed_hosts: tuple[str, ...] = (), insecure: bool = False,
                session_keys: tuple[StoredKey, ...] = ()) -> int:
    """Serve the gateway until SIGINT/SIGTERM; every copy is stopped on the way out. Refuses (2) to listen beyond
    loopback without keys unless `insecure`."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per health check otherwise
    folder = (state_dir or DEFAULT_STATE_DIR).expanduser()
    if not may_listen(folder, host, insecure):
        return 2
    security = SecuritySettings.from_env(allowed_hosts=allowed_hosts, bind_host=host, session_keys=session_keys)
    app = create_gateway(folder, security=security)
    log.info("pier gateway on http://%s:%d (state in %s)", host, port, folder)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=5)
    return 0


def _lifespan(gateway: Gateway) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.create_task(gateway.reconciler.run(), name="reconciler")
        try:
            yield
        finally:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            await gateway.reconciler.close()
            await gateway.backend.close()
            await gateway.runtime.aclose()
            gateway.state.close()

    return lifespan


def _assemble(state_dir: Path, backend: Backend, tick_s: float, store: ModelStore | None) -> Gateway:
    state = State.open(state_dir)
    fetches = Fetches(store or ModelStore(state_dir / "models"))
    reconciler = Reconciler(state, backend, fetches, tick_s=tick_s)
    control = ControlPlane(state, copies=reconciler.copies, wake=lambda: reconciler.wake(retry_fetches=True))
    targets = Targets(state, reconciler.copies)
    return Gateway(state, backend, reconciler, control, targets, RuntimeService(targets.resolve))


def _local_backend(state_dir: Path) -> Backend:
    from pier.backends.local import LocalBackend

    return LocalBackend(state_dir)


def _gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


# ---- SageMaker control plane


async def _control_route(request: Request) -> Response:
    request_id = str(uuid.uuid4())
    try:
        operation = _operation(request.headers.get("x-amz-target", ""))
        body = _json_object(await request.body())
        reply = _gateway(request).control.call(operation, body, region_of(request.headers.get("authorization")))
        return JSONResponse(reply, headers={REQUEST_ID: request_id}, media_type=AMZ_JSON)
    except ControlError as error:
        return _control_error(error.aws_type, error.message, error.status, request_id)
    except Exception as error:
        log.exception("control plane request failed")
        message = f"Internal error in pier ({type(error).__name__}: {error}); please report it. Retrying may work."
        return _control_error("InternalFailure", message, 500, request_id)


def _operation(target: str) -> str:
    service, _, operation = target.partition(".")
    if service != "SageMaker" or not operation:
        raise UnknownOperation(
            f"pier serves the SageMaker API at POST / with X-Amz-Target: SageMaker.<Operation>; got {target!r}."
        )
    return operation


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SerializationError(f"The request body is not JSON ({error}); send a JSON object.") from None
    if not isinstance(body, dict):
        raise SerializationError("The request body must be a JSON object.")
    return body


def _control_error(kind: str, message: str, status: int, request_id: str) -> JSONResponse:
    return JSONResponse({"__type": kind, "message": message}, status, headers={REQUEST_ID: request_id},
                        media_type=AMZ_JSON)


# ---- health, OpenAI model list, copies


async def _ping(request: Request) -> Response:
    return PlainTextResponse("")


async def _openai_models(request: Request) -> Response:
    """Every endpoint and inference component in service, by the name the OpenAI routes take as `model`."""
    state = _gateway(request).state
    models = [(e.name, e.created) for e in state.endpoints.all() if e.status == "InService"]
    models += [(c.name, c.created) for c in state.components.all() if c.status == "InService"]
    data = [{"id": name, "object": "model", "created": int(created), "owned_by": "pier"} for name, created in models]
    return JSONResponse({"object": "list", "data": data})


async def _copies(request: Request) -> Response:
    """Every copy the backend runs (pier's own API, for `pier ls`, `describe` and `logs`)."""
    statuses = _gateway(request).backend.statuses()
    rows = [{"copy_id": c.copy_id, "component": c.component, "state": c.state.value, "url": c.url,
             "message": c.message, "restarts": c.restarts, "pid": c.pid} for c in statuses]
    return JSONResponse({"copies": rows})


async def _copy_logs(copy_id: str, request: Request, lines: int = 200) -> Response:
    try:
        return PlainTextResponse(_gateway(request).backend.logs(copy_id, lines))
    except (KeyError, ValueError) as error:
        message = error.args[0] if error.args else str(error)
        return JSONResponse({"message": f"{message} GET /pier/copies lists the copies."}, 404)


def main(argv: list[str] | None = None) -> int:
    """`python -m pier.gateway`: what `pier up` runs."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pier.gateway", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--state-dir", type=Path, default=None, help=f"default {DEFAULT_STATE_DIR}")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                        help="also answer requests for this Host name (repeatable; '*' = any)")
    parser.add_argument("--insecure", action="store_true",
                        help="listen beyond loopback even without keys (no authentication)")
    args = parser.parse_args(argv)
    return run_gateway(args.port, args.state_dir, host=args.host, log_level=args.log_level,
                       allowed_hosts=tuple(args.allow_host), insecure=args.insecure)


if __name__ == "__main__":
    raise SystemExit(main())
