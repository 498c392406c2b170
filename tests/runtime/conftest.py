from __future__ import annotations

import pytest

from tests.backends.conftest import model_dir  # noqa: F401  (the TINY model folder, for e2e tests)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
