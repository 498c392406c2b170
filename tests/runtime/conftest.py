from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.backends.conftest import model_dir  # noqa: F401  (the TINY model folder, for e2e tests)
from tests.runtime.servers import CopyServer, Gateway, copy_server, gateway


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def copy() -> Iterator[CopyServer]:
    """A real model server (over the fake engine) on a loopback port, shared by a module's tests."""
    with copy_server() as server:
        yield server


@pytest.fixture
def gw(copy: CopyServer) -> Iterator[Gateway]:
    """A gateway whose endpoint `llm` routes to that one copy."""
    with gateway() as started:
        started.route("llm", [copy.status("llm-1")])
        yield started
