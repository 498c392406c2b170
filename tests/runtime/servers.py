"""Real HTTP servers for runtime tests: model servers over the fake engine (copies), and the gateway's routes."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
import numpy as np
from botocore.config import Config
from fastapi import FastAPI, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from pier.backends.base import CopyState, CopyStatus
from pier.channel.headers import REFUSED_HEADER
from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.runner import Batch
from pier.runtime.errors import EndpointNotFound
from pier.runtime.http_api import openai_api, runtime_api
from pier.runtime.invoke import RuntimeService
from pier.runtime.settings import RuntimeSettings
from pier.runtime.target import Target
from pier.server.app import create_app
from pier.server.settings import ServerSettings
from tests.sockets import serving


class SlowRunner(FakeRunner):
    """The fake model at a human pace, so requests are still running when a test acts on them."""

    def __init__(self, seconds_per_step: float) -> None:
        super().__init__(n_ctx=4096, n_seq_max=16, n_batch=64)
        self.seconds_per_step = seconds_per_step

    def decode(self, batch: Batch) -> np.ndarray:
        time.sleep(self.seconds_per_step)
        return super().decode(batch)




@dataclass
class CopyServer:
    url: str
    engine: Engine
    app: FastAPI

    def shut_down(self) -> None:
        """What SIGTERM does to a copy: it finishes what it has and refuses new requests."""
        self.app.state.pier.draining = True

    def status(self, copy_id: str, component: str = "ic", state: CopyState = CopyState.READY) -> CopyStatus:
        return CopyStatus(copy_id, component, state, url=self.url, pid=1)


@contextmanager
def copy_server(runner: FakeRunner | None = None) -> Iterator[CopyServer]:
    """pier's model server over a fake engine: a copy, minus the process."""
    engine = Engine(runner or FakeRunner(n_ctx=4096), EngineConfig(max_running=4, step_tokens=64)).start()
    try:
        app = create_app(ServerSettings(model_name="fake-model"), engine=engine)
        with serving(app) as url:
            yield CopyServer(url, engine, app)
    finally:
        engine.stop()


@dataclass
class Gateway:
    url: str
    service: RuntimeService
    targets: dict[str, Target] = field(default_factory=dict)

    def route(self, endpoint: str, copies: Sequence[CopyStatus], component: str = "ic",
              variant: str = "AllTraffic") -> None:
        self.targets[endpoint] = Target(list(copies), component, variant)


@contextmanager
def gateway(settings: RuntimeSettings | None = None) -> Iterator[Gateway]:
    targets: dict[str, Target] = {}

    def resolve(endpoint: str, component: str | None, variant: str | None) -> Target:
        if endpoint not in targets:
            raise EndpointNotFound(endpoint, "000000000000")
        return targets[endpoint]

    service = RuntimeService(resolve, settings)
    app = FastAPI()
    app.include_router(runtime_api(service))
    app.include_router(openai_api(service))
    with serving(app) as url:
        yield Gateway(url, service, targets)


def runtime_client(url: str, *, attempts: int = 1, read_timeout: float = 60) -> Any:
    """boto3's SageMaker runtime client pointed at the gateway, as users redirect it."""
    return boto3.client(
        "sagemaker-runtime", endpoint_url=url, region_name="us-east-1", aws_access_key_id="pier",
        aws_secret_access_key="pier",
        config=Config(retries={"max_attempts": attempts, "mode": "standard"}, read_timeout=read_timeout,
                      connect_timeout=5),
    )


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return bool(condition())


def headers_of(response: Mapping[str, object]) -> Mapping[str, str]:
    metadata = response["ResponseMetadata"]
    assert isinstance(metadata, dict)
    return metadata["HTTPHeaders"]


def echo_app(seen: list[dict[str, Any]]) -> FastAPI:
    """A copy that answers with what it was sent (the real server has no way to set custom attributes), or
    crashes after its first event when the body is `break-stream`."""
    app = FastAPI()

    @app.post("/invocations", response_model=None)
    async def invocations(request: Request) -> Response:
        body = await request.body()
        seen.append({"headers": dict(request.headers), "body": body})
        if body == b"break-stream":
            return StreamingResponse(_breaking(), media_type="text/event-stream")
        attributes = request.headers.get("x-amzn-sagemaker-custom-attributes", "")
        return Response(body, headers={  # the header as given: Response(media_type=) would add a charset
            "Content-Type": request.headers.get("accept", "application/octet-stream"),
            "X-Amzn-SageMaker-Custom-Attributes": f"echo {attributes}",
        })

    return app


async def _breaking() -> AsyncIterator[bytes]:
    yield b"data: first\n\n"
    await asyncio.sleep(0.05)
    raise RuntimeError("the copy crashed mid-stream (on purpose)")


@contextmanager
def hanging_up_server() -> Iterator[tuple[str, list[bytes]]]:
    """A copy that reads a request and closes the connection without a word, as a crashing process does."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                received.append(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", received
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@dataclass
class CountingCopy:
    """A copy that counts the requests it works on at once (`peak`), each held until `gate` opens (or for
    `hold_s`). Past `limit` it answers 429 as the model server does when full (`refused_header`), or as a
    handler's own 429 does (no header)."""

    hold_s: float = 0.2
    gate: threading.Event | None = None
    limit: int | None = None
    refused_header: bool = True
    in_flight: int = 0
    peak: int = 0
    served: int = 0
    refused: int = 0

    def app(self) -> FastAPI:
        app = FastAPI()
        for path in ("/invocations", "/v1/chat/completions", "/v1/completions"):
            app.add_api_route(path, self._handle, methods=["POST"], response_model=None)
        return app

    async def _handle(self, request: Request) -> Response:
        await request.body()
        if self.limit is not None and self.in_flight >= self.limit:
            self.refused += 1
            headers = {"Retry-After": "1", **({REFUSED_HEADER: "overloaded"} if self.refused_header else {})}
            return JSONResponse({"error": {"message": "Model is overloaded", "type": "rate_limit_error"}}, 429,
                                headers)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.gate is not None:
                while not self.gate.is_set():
                    await asyncio.sleep(0.01)
            else:
                await asyncio.sleep(self.hold_s)
        finally:
            self.in_flight -= 1
        self.served += 1
        return JSONResponse({
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": "counting",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        })
