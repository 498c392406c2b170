"""The model-server process, exactly what a SageMaker inference container runs for `<image> serve`.

It listens at once (port 8080 unless SAGEMAKER_BIND_TO_PORT) and answers /ping with 503 while the
model loads on a thread of its own, then 200. SIGTERM starts a drain: /ping turns 503, new requests are
refused with 503, requests in flight finish, and the process exits before SageMaker's SIGKILL 30 s later.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TypeVar

import uvicorn
from fastapi import FastAPI

from pier.channel.unservable import UNSERVABLE_EXIT
from pier.env import Env, SettingsError
from pier.errors import PierError
from pier.model.chat import ChatTemplate
from pier.model.gguf_meta import read_metadata
from pier.ports import port_problem
from pier.server.app import Lifespan, attach_model, create_app, create_handler_app
from pier.server.engine_start import prove_kernels, start_engine
from pier.server.kernel_choice import KernelsUnusable
from pier.server.middleware.model_server_guard import guard_model_server
from pier.server.model_location import ModelLocation, ModelNotFound, locate_model
from pier.server.multi_model.app import create_multi_model_app
from pier.server.quantization import warn_of_quantize
from pier.server.served_embedder import ServedEmbedder
from pier.server.server_state import ServerState
from pier.server.settings import ServerSettings

if TYPE_CHECKING:
    from pier.server.byoc.pool import HandlerService

log = logging.getLogger("pier.server")
T = TypeVar("T")

SHUTDOWN_GRACE_S = 3.0  # after the drain, how long uvicorn waits for connections still open
# Asked every few seconds by SageMaker, the gateway's supervisor or Prometheus: never worth a log line.
UNLOGGED_PATHS = frozenset({"/ping", "/health", "/metrics"})


class QuietHealthChecks(logging.Filter):
    """uvicorn's access log without health checks and metric scrapes, so a copy's log (`pier logs`) shows its
    starts, loads, warnings, errors and the requests it served, not a /ping line every two seconds."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3:  # uvicorn: (client, method, path, http version, status)
            return str(args[2]).split("?", 1)[0] not in UNLOGGED_PATHS
        return True


def serve_container(
    model: str | None = None, port: int | None = None, *, host: str | None = None, threads: int | None = None,
    parallel: int | None = None, env: Mapping[str, str] | None = None,
) -> int:
    """Serve until SIGTERM (0), or until the model fails to load or is missing (1, the reason logged).
    Arguments win over the environment."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = ServerSettings.from_env(
            env, model=model, port=port, host=host, threads=threads, parallel=parallel)
        logging.getLogger().setLevel(settings.log_level.upper())
        if (problem := port_problem(settings.host, settings.port)) is not None:  # before a model load, not after
            log.error("cannot serve: %s", problem)
            return 1
        if settings.multi_model is not None:
            app = create_multi_model_app(settings, Path(settings.model), settings.multi_model)
            served: object = f"every model under {settings.model} (multi-model)"
        else:
            location = locate_model(settings.model, settings.handler)
            app = build_app(settings, location)
            served = location.handler.path if location.handler else location.gguf
            if location.gguf is not None:
                warn_of_quantize(Env(env).values, location.gguf)  # TGI's HF_MODEL_QUANTIZE, which a GGUF ignores
        guard_model_server(app, Env(env).values)  # API_KEY, PIER_COPY_SECRET (middleware.model_server_guard)
    except (SettingsError, ModelNotFound, PierError) as error:
        log.error("cannot serve: %s", error)
        return 1
    server = ContainerServer(uvicorn.Config(
        app, host=settings.host, port=settings.port, log_level=settings.log_level, lifespan="on",
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE_S), timeout_keep_alive=75,
    ), app.state.pier)
    logging.getLogger("uvicorn.access").addFilter(QuietHealthChecks())  # after uvicorn configured its loggers
    log.info("serving %s on %s:%d", served, settings.host, settings.port)
    server.run()
    state: ServerState = app.state.pier
    return (state.exit_code or 1) if state.failure is not None else 0


def build_app(settings: ServerSettings, location: ModelLocation) -> FastAPI:
    if location.handler is not None:
        from pier.server.byoc.pool import HandlerService  # bring-your-own-code mode only

        service = HandlerService(location.model_dir, workers=settings.workers, timeout_s=settings.request_deadline_s,
                                 script=location.handler, settings=settings.handler)
        return create_handler_app(settings, handler=service, lifespan=_handler_lifespan(service))
    assert location.gguf is not None
    return create_app(settings, lifespan=_engine_lifespan(settings, location.gguf))


def _engine_lifespan(settings: ServerSettings, gguf: Path) -> Lifespan:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state: ServerState = app.state.pier
        loading = asyncio.create_task(_load(app, settings, gguf))
        try:
            yield
        finally:
            loading.cancel()
            if state.model is not None:
                await asyncio.to_thread(state.model.engine.stop)
            if state.embedder is not None:
                await asyncio.to_thread(state.embedder.embedder.stop)

    return lifespan


def embedding_model_name(gguf: Path) -> str | None:
    """The name of the GGUF's model when it is an embedding model (its `<arch>.pooling_type` is mean, cls or last),
    else None."""
    arch = read_metadata(gguf, ["general.architecture"]).get("general.architecture")
    meta = read_metadata(gguf, [f"{arch}.pooling_type", "general.name"])
    if meta.get(f"{arch}.pooling_type") not in (1, 2, 3):
        return None
    return str(meta.get("general.name") or gguf.stem)


async def _load_embedder(app: FastAPI, settings: ServerSettings, gguf: Path, name: str) -> None:
    from pier.engine.embedder import Embedder  # loads llama.cpp
    from pier.server.copy_offload import copy_offload

    state: ServerState = app.state.pier
    started = time.monotonic()
    offload = copy_offload(settings, gguf, settings.context_size)

    def load() -> Embedder:
        if not offload.on_gpu:
            prove_kernels(settings, gguf, embeddings=True)
        return Embedder(gguf, n_ctx=settings.context_size, n_seq_max=min(settings.parallel, 64),
                        n_threads=settings.threads, flash_attn=settings.flash_attention, offload=offload)

    try:
        embedder = await _in_daemon_thread(load)
    except KernelsUnusable as error:
        _unservable(state, error)
        return
    except Exception as error:
        state.failure = f"{type(error).__name__}: {error}"
        log.error("could not load %s: %s", gguf, state.failure)
        return
    state.embedder = ServedEmbedder(embedder, settings.model_name or name)
    log.info("%s ready in %.1f s: an embedding model (%s pooling, %d dimensions, inputs up to %d tokens)",
             state.embedder.name, time.monotonic() - started, embedder.pooling, embedder.n_embd, embedder.n_batch)


async def _load(app: FastAPI, settings: ServerSettings, gguf: Path) -> None:
    state: ServerState = app.state.pier
    started = time.monotonic()
    try:
        embedding = await asyncio.to_thread(embedding_model_name, gguf)
    except (OSError, ValueError):
        embedding = None  # llama.cpp's load says what is wrong with the file
    if embedding is not None:
        await _load_embedder(app, settings, gguf, embedding)
        return
    try:
        engine = await _in_daemon_thread(lambda: start_engine(settings, gguf))
        try:
            chat = await _in_daemon_thread(lambda: ChatTemplate.for_model(
                engine.info, override=settings.chat_template, model_dir=gguf.parent))
            model = attach_model(app, engine, chat)
        except BaseException:
            engine.stop()
            raise
    except KernelsUnusable as error:
        _unservable(state, error)
        return
    except Exception as error:
        state.failure = f"{type(error).__name__}: {error}"
        log.error("could not load %s: %s", gguf, state.failure)
        return
    log.info(
        "%s ready in %.1f s on %s: %d KV cells of %s, %d parallel sequences, limits %s, flash attention %s",
        model.name, time.monotonic() - started, ", ".join(engine.info.devices), engine.runner.n_ctx,
        settings.kv_cache_type, settings.parallel, model.limits,
        {None: "auto", True: "on", False: "off"}[settings.flash_attention],
    )


def _unservable(state: ServerState, error: KernelsUnusable) -> None:
    """This host cannot run the model: the copy exits with UNSERVABLE_EXIT, so it is not started again."""
    state.failure = str(error)
    state.exit_code = UNSERVABLE_EXIT
    log.error("cannot serve on this host: %s", error)


def _handler_lifespan(service: HandlerService) -> Lifespan:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state: ServerState = app.state.pier
        starting = asyncio.create_task(_start_handler(state, service))
        try:
            yield
        finally:
            await service.stop()
            starting.cancel()

    return lifespan


async def _start_handler(state: ServerState, service: HandlerService) -> None:
    try:
        await service.start()
    except Exception as error:
        state.failure = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
        log.error("could not start the model's inference.py: %s", state.failure)


async def _in_daemon_thread(work: Callable[[], T]) -> T:
    """Run blocking work on a daemon thread, so a SIGTERM during a long load does not wait for it."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(outcome: Callable[[], None]) -> None:
        if not future.done():  # the awaiting task may have been cancelled meanwhile
            outcome()

    def run() -> None:
        try:
            result = work()
        except BaseException as error:
            loop.call_soon_threadsafe(deliver, partial(future.set_exception, error))
        else:
            loop.call_soon_threadsafe(deliver, partial(future.set_result, result))

    threading.Thread(target=run, name="pier-load", daemon=True).start()
    return await future


class ContainerServer(uvicorn.Server):
    """uvicorn, but SIGTERM drains instead of closing the listener: SageMaker keeps polling /ping and
    sending requests until it sees 503, and in-flight requests must be answered, not cut."""

    def __init__(self, config: uvicorn.Config, state: ServerState) -> None:
        super().__init__(config)
        self.state = state
        self._drain_deadline = 0.0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.state.draining:  # a second signal: stop waiting
            self.should_exit = True
            self.force_exit = sig == signal.SIGINT
            return
        log.info("signal %d: draining %d request(s), then exiting", sig, self.state.admission.in_flight)
        self.state.draining = True
        self._drain_deadline = time.monotonic() + self.state.settings.drain_s

    async def on_tick(self, counter: int) -> bool:
        if self.state.failure is not None:
            return True
        if self.state.draining:
            if self.state.admission.in_flight == 0:
                return True
            if time.monotonic() >= self._drain_deadline:
                log.warning("drain time is up with %d request(s) in flight", self.state.admission.in_flight)
                return True
        return await super().on_tick(counter)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pier.server.container", description=__doc__)
    parser.add_argument("--model", help="a model folder or a .gguf file (default: SM_MODEL_DIR or /opt/ml/model)")
    parser.add_argument("--port", type=int, help="port to listen on (default: SAGEMAKER_BIND_TO_PORT or 8080)")
    parser.add_argument("--host", help="address to listen on (default 0.0.0.0)")
    parser.add_argument("--threads", type=int,
                        help="CPU threads for the engine (default: the usable cores, one fewer from 8 on)")
    parser.add_argument("--parallel", type=int, help="sequences decoding at once (default 8)")
    args = parser.parse_args(argv)
    return serve_container(args.model, args.port, host=args.host, threads=args.threads, parallel=args.parallel)


if __name__ == "__main__":
    raise SystemExit(main())
