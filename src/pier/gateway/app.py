"""The `pier up` app: one port that speaks the SageMaker control plane (`POST /` with
`X-Amz-Target: SageMaker.<Operation>`), the SageMaker runtime (`/endpoints/{name}/invocations[-response-stream]`)
and OpenAI (`/v1/chat/completions`, `/v1/completions`, `/v1/models`), so code written for SageMaker works
with only `AWS_ENDPOINT_URL` changed.

Everything the gateway knows lives in `<state_dir>/state.sqlite3`; model files in `<state_dir>/models`.
A restarted gateway reads its state and the reconciler starts every copy again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException

from pier.async_inference.dispatcher import AsyncInference
from pier.async_inference.queue import AsyncQueue
from pier.autoscaling.application_autoscaling import ApplicationAutoScaling
from pier.autoscaling.autoscaling_store import Store as AutoscalingStore
from pier.autoscaling.cloudwatch import ALARM, CloudWatch
from pier.autoscaling.history import History
from pier.autoscaling.recorder import Recorder
from pier.autoscaling.scaler import Scaler
from pier.backends.base import Backend
from pier.capture.capture_writer import CaptureWriter
from pier.console.assets import console_router
from pier.control.api import ControlPlane
from pier.control.backups import Backups
from pier.control.extra import ExtraEndpoints
from pier.control.fetch.fetches import Fetches
from pier.control.fetch.model_store import ModelStore
from pier.control.gpu_pool import GpuPool
from pier.control.reconciler import Reconciler
from pier.control.request_limits import MAX_BODY_BYTES as CONTROL_MAX_BODY_BYTES
from pier.control.resource_store import ResourceStore
from pier.dialect import CBOR_PATH
from pier.gateway import autoscaling_route, pier_routes, state_files, transform_route
from pier.gateway.adapter_files import AdapterFiles
from pier.gateway.adapter_routes import adapter_list
from pier.gateway.async_route import invoke_endpoint_async
from pier.gateway.autoscaling_parts import Autoscaling
from pier.gateway.control_route import control_route
from pier.gateway.copy_board import CopyBoard, routed
from pier.gateway.copy_view import own_copies
from pier.gateway.deploy_route import deploy_route
from pier.gateway.drain import Drain, Draining
from pier.gateway.endpoint_scope import endpoint_of_state
from pier.gateway.key_table import DatabaseKeys, KeyTable
from pier.gateway.leadership import Leadership, holder_name
from pier.gateway.parts import Gateway
from pier.gateway.router_errors import router_error
from pier.gateway.scaling import GatewayCounts, Waking
from pier.gateway.settings import GatewaySettings
from pier.gateway.stores import OpenStores
from pier.gateway.taps import Taps
from pier.gateway.targets import Targets
from pier.gateway.writer import Writer
from pier.gpus import GpuInventory, discover
from pier.runtime.attempts import admission_of
from pier.runtime.http_api import openai_api, runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.session_store import SessionStore
from pier.security.install import install_security
from pier.state_folder.postgres import Postgres
from pier.storage import s3_client
from pier.transform.service import Transforms
from pier.transform.transform_store import TransformStore

log = logging.getLogger("pier.gateway")

TAKE_OVER_RETRY_S = 5.0


def create_gateway(state_dir: Path, *, backend: Backend | None = None, tick_s: float = 1.0,
                   store: ModelStore | None = None, settings: GatewaySettings | None = None,
                   gpus: GpuInventory | None = None) -> FastAPI:
    """The gateway app over the state in `state_dir`; its lifespan runs the reconciler, the autoscaler and the
    state's backups and, on the way out, stops every copy. A damaged state file raises StateDamaged here (never
    replaced), but for sessions.sqlite3, a cache the gateway serves without (saying so in its log). Every request
    passes pier.security's guard first (Host/Origin, keys, roles, audit). `settings`: what `pier up` read from its
    environment and flags (default: the defaults); `gpus`: this host's (default: discovered, pier.gpus)."""
    settings = settings or GatewaySettings()
    gateway = _assemble(state_dir, backend or _local_backend(state_dir), tick_s, store, settings, gpus)
    saver = Backups(gateway.stores.watched(), settings.backups)
    app = FastAPI(title="pier gateway", lifespan=_lifespan(gateway, saver))
    app.state.gateway = gateway
    app.state.drain = Drain(gateway.runtime.forwarder.stop)  # stopping drains (gateway/drain.py)
    app.add_middleware(Draining, drain=app.state.drain)
    app.add_exception_handler(HTTPException, router_error)  # an unknown /v1/ path answers as OpenAI does
    app.add_api_route("/", control_route, methods=["POST"], response_model=None, include_in_schema=False)
    app.add_api_route(CBOR_PATH + "{operation}", autoscaling_route.cbor_route, methods=["POST"],
                      response_model=None, include_in_schema=False)
    app.add_api_route("/ping", pier_routes.ping, methods=["GET"], response_model=None)
    app.add_api_route("/pier", pier_routes.about, methods=["GET"], response_model=None)
    app.add_api_route("/v1/models", pier_routes.openai_models, methods=["GET"], response_model=None)
    app.add_api_route("/v1/models/{model:path}", pier_routes.openai_model, methods=["GET"], response_model=None)
    app.add_api_route("/pier/copies", pier_routes.copies, methods=["GET"], response_model=None)
    app.add_api_route("/pier/copies/{copy_id}/logs", pier_routes.copy_logs, methods=["GET"], response_model=None)
    app.add_api_route("/pier/gpus", pier_routes.gpus, methods=["GET"], response_model=None)
    app.add_api_route("/pier/adapters", adapter_list, methods=["GET"], response_model=None)
    app.add_api_route("/pier/metrics/summary", pier_routes.summary, methods=["GET"], response_model=None)
    app.add_api_route("/pier/deploy", deploy_route, methods=["POST"], response_model=None)
    app.add_api_route("/pier/transform-jobs", transform_route.transform_jobs, methods=["GET"], response_model=None)
    app.add_api_route("/pier/transform-jobs/{name}", transform_route.transform_job, methods=["GET"],
                      response_model=None)
    app.include_router(console_router())  # the web console's files (pier.console)
    app.add_api_route("/metrics", pier_routes.metrics, methods=["GET"], response_model=None, include_in_schema=False)
    app.add_api_route("/endpoints/{endpoint_name}/async-invocations", invoke_endpoint_async, methods=["POST"],
                      response_model=None, include_in_schema=False)
    app.include_router(runtime_api(gateway.runtime))
    app.include_router(openai_api(gateway.runtime))
    install_security(app, state_dir, settings.security,  # pier.security: see docs/security.md
                     endpoint_of=endpoint_of_state(gateway.state),
                     max_body_bytes=gateway.runtime.settings.max_payload_bytes,
                     control_body_bytes=CONTROL_MAX_BODY_BYTES,
                     keys=DatabaseKeys(gateway.stores.get(KeyTable), settings.security.session_keys)
                     if settings.state_url else None)  # else keys.json in the folder
    return app


def _lifespan(gateway: Gateway, backups: Backups) -> Callable[[FastAPI], Any]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if gateway.leadership.url is None:  # alone on its folder it leads: its copies are its own before it serves
            await gateway.backend.take_over()
        saving = asyncio.create_task(backups.run(), name="state backups")
        # The loops run only while this gateway leads (gateway/leadership.py; always, with the state folder).
        leading = asyncio.create_task(gateway.leadership.run(lambda: _lead(gateway)), name="leadership")
        try:
            yield
        finally:
            gateway.stopping = True  # the loops end with the gateway: close() below, not let_go(), ends the copies
            saving.cancel()
            leading.cancel()
            for task in (leading, saving):
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await gateway.reconciler.close()
            await gateway.backend.close()
            await gateway.runtime.aclose()
            if gateway.taps is not None:
                await asyncio.to_thread(gateway.taps.close)  # what was captured is written before the gateway ends
            await asyncio.to_thread(backups.take)  # the last generation, on the way out
            gateway.writer.close()  # after the work already handed to it
            gateway.autoscaling.history.flush()
            gateway.stores.close()  # every store of the state folder (state_files.STORES)

    return lifespan


async def _lead(gateway: Gateway) -> None:
    """The loops only the leader runs, until cancelled (the lease lost, or the gateway stopping). The backend owns
    the copies while they run: it takes over those running as they are before the reconciler's first tick, and
    lets go of them (stopping none that another gateway can take over) when the lease is lost."""
    try:
        while True:
            try:
                await gateway.backend.take_over()
                gateway.owning.set()
                break
            except Exception as error:  # the cluster away: nothing could be done to the copies meanwhile
                log.error("this gateway leads but cannot take over the copies (%s); trying again in %.0f s", error,
                          TAKE_OVER_RETRY_S)
                await asyncio.sleep(TAKE_OVER_RETRY_S)
        await _loops(gateway)
    finally:
        gateway.owning.clear()  # routed by the board again: what the next leader publishes
        if not gateway.stopping:
            await gateway.backend.let_go()


async def _loops(gateway: Gateway) -> None:
    loop = asyncio.create_task(gateway.reconciler.run(), name="reconciler")
    scaling = asyncio.create_task(gateway.autoscaling.scaler.run(gateway.writer.run), name="autoscaler")
    queued = asyncio.create_task(gateway.async_inference.run(), name="async inference") \
        if gateway.async_inference else None
    jobs = asyncio.create_task(gateway.transforms.run(), name="transform jobs") if gateway.transforms else None
    board = gateway.copy_board  # the followers route by what is published (gateway/copy_board.py)
    published = asyncio.create_task(board.publishing(
        lambda: own_copies(gateway.backend, gateway.reconciler, gateway.leadership.me)), name="copies published") \
        if board else None
    try:
        await asyncio.gather(loop, scaling, *(task for task in (queued, jobs, published) if task is not None))
    finally:
        loop.cancel()
        scaling.cancel()
        if queued is not None:  # first: its running requests wait again for the next start (or leader)
            queued.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await queued
        others = [task for task in (jobs, published) if task is not None]
        for task in others:
            task.cancel()
        for task in (loop, scaling, *others):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _assemble(state_dir: Path, backend: Backend, tick_s: float, store: ModelStore | None,
              settings: GatewaySettings, gpus: GpuInventory | None) -> Gateway:
    state_files.refuse_damaged(state_dir)  # the files not opened below (keys.json): refused with the fix
    # every store (state_files.STORES), in the state folder or the database of --state-url; damage refused here
    database = Postgres(settings.state_url) if settings.state_url else None
    stores = OpenStores(state_dir, (*state_files.STORES, KeyTable, CopyBoard) if database else state_files.STORES,
                        driver=database)  # with a database, the keys and the leader's copies too
    leadership = Leadership(settings.state_url, holder_name())
    board = stores.get(CopyBoard) if database else None  # a follower routes to the leader's copies
    state, scaling_store = stores.get(ResourceStore), stores.get(AutoscalingStore)
    fetches = Fetches(store or ModelStore(state_dir / "models"))
    # A backend whose copies do not run on this host (ray) says which cores copies are numbered against, and this
    # host's cores and memory do not cap how many copies there are.
    elsewhere = backend.capabilities.host_cores
    cap = settings.copy_cap(on_cluster=elsewhere is not None)
    # Copies on this host are handed this host's GPUs; on a cluster, Ray hands each copy its node's (num_gpus).
    pool = GpuPool(None if elsewhere is not None else gpus or discover(), settings.cpu_fallback)
    extra = ExtraEndpoints()  # running transform jobs' endpoints, whose copies the reconciler places too
    reconciler = Reconciler(state, backend, fetches, tick_s=tick_s, host=elsewhere, copy_cap=cap, gpus=pool,
                            alarm_state=lambda name: (scaling_store.get(ALARM, name) or {}).get("StateValue"),
                            extra=extra)
    writer = Writer()  # control-plane and autoscaling calls run there; their wake-ups come back to the loop
    if board is not None:  # the followers find a copy published before a status sends them to it
        reconciler.publish = partial(board.published, lambda: own_copies(backend, reconciler, leadership.me))
    # What a request and a describe see of the copies: this gateway's own while it leads and owns them (taken
    # over), else the leader's as published.
    owning = threading.Event()
    seen = routed(board, owning.is_set, reconciler.copies)
    control = ControlPlane(state, copies=seen,
                           wake=writer.soon(lambda: reconciler.wake(retry_fetches=True)),
                           copy_cap=cap, on_this_host=elsewhere is None)
    history = History(scaling_store, retention_s=settings.scaling.retention_s)
    recorder = Recorder(history)
    admission = admission_of(settings.runtime)  # the runtime's, whose load autoscaling reads too
    counts = GatewayCounts(state, control, seen, admission,
                            local=backend.capabilities.local_processes)
    scaler = Scaler(scaling_store, history, recorder, counts, settings.scaling)
    targets = Targets(state, seen,
                      waker=Waking(scaler, counts, recorder, settings.runtime.queue_timeout_s),
                      adapter_files=AdapterFiles(fetches, wait_s=settings.runtime.deadline_s))
    taps = Taps(state, CaptureWriter(s3_client, settings.capture, registry=recorder.registry))
    runtime = RuntimeService(targets.resolve, settings.runtime, observer=recorder, admission=admission,
                             session_store=stores.serving(SessionStore), tap=taps, path_on=backend.path_on)
    autoscaling = Autoscaling(
        scaling_store, history, recorder, scaler,
        ApplicationAutoScaling(scaling_store, counts, changed=writer.soon(scaler.poke)),
        CloudWatch(scaling_store, history, changed=writer.soon(scaler.poke)))
    queue = AsyncInference(stores.get(AsyncQueue), state, runtime, reconciler.copies, recorder, scaler,
                           relay=settings.notification_relay)
    transforms = Transforms(stores.get(TransformStore), state, copies=reconciler.copies, fetch=fetches.get,
                            wake=writer.soon(reconciler.wake), problem=reconciler.placement_problem, extra=extra,
                            forwarder=runtime.forwarder)
    return Gateway(state, backend, reconciler, control, targets, runtime, autoscaling, writer, stores, taps, queue,
                   transforms, leadership, board, owning)


def _local_backend(state_dir: Path) -> Backend:
    from pier.backends.local import LocalBackend

    return LocalBackend(state_dir)
