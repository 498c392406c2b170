"""A multi-model copy (SageMaker's `Mode: MultiModel`): one model-server process serving every model under its
model folder by name. `/invocations` with `X-Amzn-SageMaker-Target-Model` goes to that model's own app (every
flavor over its own engine, as a single-model copy serves it), loaded through the `ModelCache` on first use;
the answer carries a `CacheReport` for the gateway's metrics and routing.

A target is a path relative to the folder, as SageMaker takes it relative to the ModelDataUrl prefix: a GGUF file,
or an archive (model.tar.gz) unpacked on first use into the copy's scratch folder (the "download" of the model).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import shutil
import tarfile
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pier.dialect import Dialect
from pier.env import SettingsError
from pier.errors import InvalidRequest, PierError
from pier.model.gguf_meta import GgufFormatError
from pier.multi_model import TARGET_MODEL_HEADER, model_path
from pier.server.engine_start import start_engine
from pier.server.errors import ShuttingDown, error_response
from pier.server.kernel_choice import ready_headers
from pier.server.kv_budget import kv_cells, kv_shape
from pier.server.model_location import ModelNotFound, find_gguf
from pier.server.multi_model.cache import Loaded, ModelCache, Prepared
from pier.server.server_state import ServerState
from pier.server.settings import MultiModelSettings, ServerSettings

log = logging.getLogger("pier.server")
T = TypeVar("T")


class UnknownModel(LookupError):
    """The target names no model file under the copy's model folder."""


def model_file(root: Path, name: str) -> Path:
    path = model_path(root, name)
    if path is None:
        raise UnknownModel(name)
    return path


class ModelFiles:
    """Targets to GGUF files: a GGUF as it is, an archive unpacked once into `scratch`."""

    def __init__(self, root: Path, scratch: Path) -> None:
        self.root = root
        self.scratch = scratch

    def gguf(self, name: str) -> tuple[Path, bool]:
        """The model's GGUF, and whether its archive was unpacked just now (blocking). An archive is unpacked once
        per copy: a model unloaded and loaded again reads its unpacked files."""
        path = model_file(self.root, name)
        if path.suffix == ".gguf":
            return path, False
        folder = self.scratch / hashlib.sha256(name.encode()).hexdigest()[:16]
        unpacked = not folder.is_dir()
        if unpacked:
            partial = Path(tempfile.mkdtemp(dir=self.scratch))
            with tarfile.open(path) as archive:
                archive.extractall(partial, filter="data")  # no paths outside, no devices, no odd modes
            partial.rename(folder)
        return find_gguf(folder), unpacked


def footprint(settings: ServerSettings, gguf: Path) -> int:
    """What a loaded model takes: its weights and its KV cache."""
    cells = kv_cells(settings, gguf)
    return gguf.stat().st_size + cells * kv_shape(gguf).cell_bytes(settings.kv_cache_type)


def create_multi_model_app(settings: ServerSettings, root: Path, models: MultiModelSettings) -> FastAPI:
    scratch = Path(tempfile.mkdtemp(prefix="pier-models-"))
    files = ModelFiles(root, scratch)
    state = ServerState(settings)

    async def prepare(name: str) -> Prepared:
        started = time.monotonic()
        gguf, unpacked = await _thread(lambda: files.gguf(name))
        download_s = time.monotonic() - started if unpacked else 0.0
        size = await _thread(lambda: footprint(settings, gguf))
        return Prepared(size, download_s, lambda: _load(settings, gguf, size))

    cache = ModelCache(prepare, _thread, int(models.memory_mb * 2**20), models.keep_models)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await cache.close()
            shutil.rmtree(scratch, ignore_errors=True)

    async def ping(request: Request) -> Response:
        if state.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        return JSONResponse({"status": "ready", "models": list(cache.loaded)},
                            headers=ready_headers(state.concurrency))

    async def metrics(request: Request) -> Response:
        body, content_type = state.metrics.exposition()
        return Response(body, media_type=content_type)

    app = FastAPI(title="pier multi-model server", lifespan=lifespan)
    app.add_api_route("/ping", ping, methods=["GET"])
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    app.add_middleware(_Dispatch, cache=cache, state=state, root=root)
    app.state.pier = state
    app.state.models = cache
    return app


class _Dispatch:
    """POST /invocations (and every other model route) to the target's app; /ping and /metrics to the copy's own."""

    def __init__(self, app: ASGIApp, *, cache: ModelCache, state: ServerState, root: Path) -> None:
        self.app = app
        self.cache = cache
        self.server = state
        self.cache_root = root

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in ("/ping", "/metrics"):
            await self.app(scope, receive, send)
            return
        try:
            await self._invoke(scope, receive, send)
        except PierError as error:  # refused before any work: the gateway may send it to another copy
            await error_response(error, Dialect.SAGEMAKER)(scope, receive, send)

    async def _invoke(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.server.draining:
            raise ShuttingDown("This model server is shutting down and takes no new requests; retry.")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        name = headers.get(TARGET_MODEL_HEADER.lower())
        if not name:
            raise InvalidRequest("This is a multi-model copy: name the model to invoke with TargetModel (the "
                                 f"{TARGET_MODEL_HEADER} header).")
        ticket = self.server.admission.enter()
        try:
            async with self.cache.use(name) as use:
                report = [(k.encode(), v.encode()) for k, v in use.report.headers().items()]

                async def send_with_report(message: Message) -> None:
                    if message["type"] == "http.response.start":
                        message = {**message, "headers": [*message.get("headers", []), *report]}
                    await send(message)

                await use.app(scope, receive, send_with_report)  # type: ignore[operator]
        except UnknownModel:
            raise InvalidRequest(f"No model {name} under this copy's model folder ({self.cache_root}).") from None
        except (ModelNotFound, SettingsError, GgufFormatError, tarfile.TarError) as error:
            raise InvalidRequest(f"Model {name} cannot be served: {error}") from None
        finally:
            ticket.release()


def _load(settings: ServerSettings, gguf: Path, size: int) -> Loaded:
    from pier.model.chat import ChatTemplate
    from pier.server.app import create_app

    engine = start_engine(settings, gguf)
    try:
        chat = ChatTemplate.for_model(engine.info, override=settings.chat_template, model_dir=gguf.parent)
        app = create_app(settings, engine=engine, chat=chat)
    except BaseException:
        engine.stop()
        raise
    return Loaded(app, size, engine.stop)


async def _thread(work: Callable[[], T]) -> T:
    return await asyncio.to_thread(work)
