"""LoRA adapters on a model server: loaded on a request's first use, kept, and applied to that request only.

The gateway names a request's adapter in three headers (pier.channel.headers): its name, the GGUF file on this
host, and its scale. The first request for a name loads the file (on a worker thread, once however many ask at
the same time); later ones find it loaded. Requests under different adapters and the base model share the
engine's batches (engine/passes.py). `GET /pier/adapters` lists what is loaded and the memory each one holds.
Only a copy started by a gateway (one with a copy secret, so only its gateway reaches it) takes the headers.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from fastapi import APIRouter, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from pier.channel.headers import ADAPTER_FILE_HEADER, ADAPTER_HEADER, ADAPTER_SCALE_HEADER
from pier.errors import InvalidRequest
from pier.server.errors import error_response, request_dialect

# As ASGI gives them: lower case, in bytes.
_ADAPTER = ADAPTER_HEADER.lower().encode()
_ADAPTER_FILE = ADAPTER_FILE_HEADER.lower().encode()
_ADAPTER_SCALE = ADAPTER_SCALE_HEADER.lower().encode()

_VERSION = "@"  # between a component's name (which has no "@") and its file's identity: `engine_name`
_current: ContextVar[str] = ContextVar("pier_adapter", default="")

router = APIRouter()


def current() -> str:
    """The adapter the request being handled runs under ("" = the base model)."""
    return _current.get()


class AdapterRequests:
    """The middleware: loads the adapter a request names, if need be, and marks the request with it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._loading: dict[str, asyncio.Lock] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers", ())) if scope["type"] == "http" else {}
        name = headers.get(_ADAPTER, b"").decode("latin-1")
        if not name:
            await self.app(scope, receive, send)
            return
        try:
            version = await self._load(scope, name, headers)
        except (InvalidRequest, ValueError) as error:
            refused = error if isinstance(error, InvalidRequest) else InvalidRequest(str(error))
            await error_response(refused, request_dialect(scope))(scope, receive, send)
            return
        token = _current.set(version)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)

    async def _load(self, scope: Scope, name: str, headers: dict[bytes, bytes]) -> str:
        if not scope["app"].state.pier.settings.from_gateway:  # adapters come from the gateway that started it
            raise InvalidRequest("This model server takes adapters from its gateway only: create an adapter "
                                 "inference component (BaseInferenceComponentName) and invoke it.")
        model = scope["app"].state.pier.model
        adapters = getattr(model.engine.runner, "adapters", None) if model is not None else None
        if adapters is None:
            raise InvalidRequest("This copy's model does not take LoRA adapters (no llama.cpp model loaded).")
        path = Path(headers.get(_ADAPTER_FILE, b"").decode("utf-8"))
        scale = float(headers.get(_ADAPTER_SCALE, b"1").decode("latin-1"))
        if not path.exists() and (kept := loaded_version(adapters.loaded, name, path, scale)) is not None:
            return kept  # its file was deleted (a file:// artifact): what was loaded serves on, as a model does
        version = engine_name(name, path, scale)
        lock = self._loading.setdefault(version, asyncio.Lock())
        async with lock:
            await asyncio.to_thread(adapters.load, version, path, scale)
        return version


def engine_name(name: str, path: Path, scale: float) -> str:
    """The name the engine knows one version of an adapter by: its component's name and its file's identity.
    An updated adapter (another artifact, a file rewritten in place, another scale) is another engine adapter,
    so no request runs on KV the prefix cache computed under the old file, and the old handle is never swapped
    out from under a running decode (engine/loaded_adapters.py). The old version stays loaded until the copy stops."""
    try:
        stat = path.stat()
        identity = f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0{scale!r}"
    except OSError:  # no file: the engine's load says so
        identity = f"{path}\0{scale!r}"
    return f"{name}{_VERSION}{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


class _Loaded(Protocol):
    name: str
    path: str
    scale: float


def loaded_version(loaded: Sequence[_Loaded], name: str, path: Path, scale: float) -> str | None:
    """The engine name of the latest version of adapter `name` loaded from `path` at `scale`, if any."""
    found = [a.name for a in loaded if component_name(a.name) == name and a.path == str(path) and a.scale == scale]
    return found[-1] if found else None


def component_name(engine: str) -> str:
    return engine.partition(_VERSION)[0]


@router.get("/pier/adapters", include_in_schema=False)
async def loaded(request: Request) -> dict[str, Any]:
    """The adapters this copy has loaded, with the bytes each one's tensors hold."""
    model = request.app.state.pier.model
    adapters = getattr(model.engine.runner, "adapters", None) if model is not None else None
    listed = adapters.loaded if adapters is not None else []
    return {"adapters": [{"name": component_name(a.name), "path": a.path, "scale": a.scale, "bytes": a.nbytes,
                          "alpha": a.alpha} for a in listed]}
