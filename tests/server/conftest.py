"""Fixtures for server tests: the real app over a real Engine on the deterministic FakeRunner."""

from __future__ import annotations

import shutil
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.engine.runner import Batch
from pier.server.app import create_app
from pier.server.settings import ServerSettings


class SlowRunner(FakeRunner):
    """The fake model at a human pace, so requests are still running when a test acts on them."""

    def __init__(self, seconds_per_step: float, **kwargs: int) -> None:
        super().__init__(**kwargs)
        self.seconds_per_step = seconds_per_step

    def decode(self, batch: Batch) -> np.ndarray:
        time.sleep(self.seconds_per_step)
        return super().decode(batch)


def start_engine(runner: FakeRunner) -> Engine:
    return Engine(runner, EngineConfig(max_running=4, step_tokens=64)).start()


@pytest.fixture(scope="module")
def model_dir(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SageMaker-style model folder holding a TINY GGUF (for tests that start real processes)."""
    folder = tmp_path_factory.mktemp("opt-ml-model")
    shutil.copy(tiny_gguf, folder / "model.gguf")
    return folder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64)


@pytest.fixture
def engine(runner: FakeRunner) -> Iterator[Engine]:
    engine = start_engine(runner)
    yield engine
    engine.stop()


@pytest.fixture
def settings() -> ServerSettings:
    return ServerSettings(model_name="fake-model")


@pytest.fixture
def app(engine: Engine, settings: ServerSettings) -> FastAPI:
    return create_app(settings, engine=engine)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
        yield client


@asynccontextmanager
async def app_client(
    runner: FakeRunner | None = None, settings: ServerSettings | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of an app over its own engine, for tests that need a particular runner or settings."""
    engine = start_engine(runner or FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64))
    try:
        app = create_app(settings or ServerSettings(model_name="fake-model"), engine=engine)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
            yield client
    finally:
        engine.stop()


def wait_until(condition: Callable[[], bool], timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def sse_data(body: str) -> list[str]:
    """The `data` payloads of a server-sent event stream, in order (both `data:` and `data: ` forms)."""
    events = [block for block in body.split("\n\n") if block.strip()]
    assert all(block.startswith("data:") for block in events), body
    return [block[len("data:") :].lstrip(" ") for block in events]
