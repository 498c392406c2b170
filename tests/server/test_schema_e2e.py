"""Schemathesis against the running server's own OpenAPI schema: whatever a client sends, never a 5xx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def api_schema(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    # A small context keeps every generated request short, so the whole run stays well under a minute.
    log = tmp_path_factory.mktemp("schema-logs") / "server.log"
    with ContainerProcess(model_dir, log, MAX_BATCH_TOTAL_TOKENS="256", SAGEMAKER_MODEL_SERVER_TIMEOUT="10") as server:
        server.wait_ready()
        yield schemathesis.openapi.from_url(server.url + "/openapi.json")
    assert "Traceback" not in server.output(), server.output()


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_request_gets_a_server_error(case: schemathesis.Case) -> None:
    case.call_and_validate(checks=[not_a_server_error], timeout=15)
