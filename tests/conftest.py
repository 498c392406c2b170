"""Shared fixtures: real GGUF files built once per test session (random weights, no download)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pier.state_folder.store import Driver
from tests import postgres
from tests.postgres import PostgresServer


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import TINY, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "tiny-q8_0.gguf", TINY, quant="Q8_0")


@pytest.fixture(scope="session")
def small_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import SMALL, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "small-q4_0.gguf", SMALL, quant="Q4_0")


@pytest.fixture(scope="session")
def small_f32_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pier.synthetic.builder import SMALL, build_gguf

    return build_gguf(tmp_path_factory.mktemp("models") / "small-f32.gguf", SMALL, quant="F32")


@pytest.fixture(scope="session")
def embedding_ggufs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TINY embedding models, one per pooling type llama.cpp has for them."""
    from pier.synthetic.builder import POOLINGS, TINY, build_gguf

    folder = tmp_path_factory.mktemp("embedding-models")
    return {pooling: build_gguf(folder / f"embed-{pooling}.gguf", TINY, quant="Q8_0", name=f"embed-{pooling}",
                                pooling=pooling) for pooling in POOLINGS}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL 15 of the session's own (tests/postgres.py); the cases that need it skip where it is absent."""
    if not postgres.available():
        pytest.skip(postgres.MISSING)
    server = PostgresServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def driver(request: pytest.FixtureRequest) -> Driver | None:
    """Where a store test keeps its store: the state folder's file (None: the default), or a new database of the
    session's PostgreSQL. A store's test that takes it runs on both."""
    if request.param == "sqlite":
        return None
    from pier.state_folder.postgres import Postgres

    server: PostgresServer = request.getfixturevalue("postgres_server")
    return Postgres(server.database())
