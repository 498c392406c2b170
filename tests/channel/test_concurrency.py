"""A copy's concurrency: read from its environment by one pure function, the same number the model server
enforces, and reported by the local backend for the gateway's router."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from pier.backends.base import CopySpec
from pier.backends.supervisor import CopySupervisor, SupervisionSettings
from pier.channel.concurrency import copy_concurrency, reported_concurrency
from pier.channel.headers import CONCURRENCY_HEADER
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client

ENVIRONMENTS = [
    # (environment, concurrency)
    ({}, 8),
    ({"MAX_CONCURRENT_REQUESTS": "4"}, 4),
    ({"MAX_CONCURRENT_REQUESTS": "64"}, 8),
    ({"PIER_PARALLEL": "16"}, 16),
    ({"PIER_PARALLEL": "200"}, 128),  # TGI's default MAX_CONCURRENT_REQUESTS
    ({"MAX_BATCH_SIZE": "2"}, 2),  # TGI's name for the same thing
    ({"PIER_PARALLEL": "3", "MAX_BATCH_SIZE": "12"}, 3),  # pier's own name wins
    ({"PIER_PARALLEL": "  ", "MAX_BATCH_SIZE": "12"}, 12),  # blank counts as unset
    ({"PIER_PARALLEL": ' "6" ', "MAX_CONCURRENT_REQUESTS": '"5"'}, 5),  # json.dumps()'d numbers, as the SDK sends
    ({"MAX_CONCURRENT_REQUESTS": "1", "PIER_PARALLEL": "8"}, 1),
]


@pytest.mark.parametrize(("environment", "expected"), ENVIRONMENTS)
def test_concurrency_from_the_environment(environment: dict[str, str], expected: int) -> None:
    assert copy_concurrency(environment) == expected


@pytest.mark.parametrize(("environment", "expected"), ENVIRONMENTS)
def test_the_server_reads_the_same_numbers(environment: dict[str, str], expected: int) -> None:
    """If the server's settings and the gateway's reading ever disagree, this fails."""
    settings = ServerSettings.from_env(environment)
    assert min(settings.max_concurrent_requests, settings.parallel) == expected


@pytest.mark.parametrize("environment", [{"PIER_PARALLEL": "many"}, {"MAX_CONCURRENT_REQUESTS": "0"}])
def test_values_a_copy_refuses_to_start_with_count_as_unset(environment: dict[str, str]) -> None:
    assert copy_concurrency(environment) == 8


def test_the_local_backend_reports_each_copys_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PIER_PARALLEL", raising=False)
    monkeypatch.setenv("MAX_CONCURRENT_REQUESTS", "1")  # the gateway's own environment does not reach its copies
    spec = CopySpec("c-0", "c", tmp_path, environment={"PIER_PARALLEL": "3"})
    supervisor = CopySupervisor(spec, tmp_path / "c-0", SupervisionSettings(), httpx.AsyncClient())
    assert supervisor.status().concurrency == 3
    spec = CopySpec("c-1", "c", tmp_path, environment={"PIER_PARALLEL": "3", "MAX_CONCURRENT_REQUESTS": "2"})
    supervisor = CopySupervisor(spec, tmp_path / "c-1", SupervisionSettings(), httpx.AsyncClient())
    assert supervisor.status().concurrency == 2


@pytest.mark.parametrize(("header", "expected"), [
    ("2", 2), (" 16 ", 16), (None, None), ("", None), ("0", None), ("-3", None), ("many", None), ("2.5", None),
])
def test_a_copy_s_own_word_on_its_concurrency(header: str | None, expected: int | None) -> None:
    assert reported_concurrency(header) == expected


@pytest.mark.anyio
@pytest.mark.parametrize(("header", "expected"), [("1", 1), ("garbage", 8), (None, 8)])
async def test_the_supervisor_takes_the_ready_copy_s_word_over_its_environment(
        tmp_path: Path, header: str | None, expected: int) -> None:
    """A copy serving its own inference.py with one handler worker says 1, though its environment reads as 8."""
    def ping(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"status": "ready"}, headers={CONCURRENCY_HEADER: header} if header else {})

    async with httpx.AsyncClient(transport=httpx.MockTransport(ping)) as client:
        supervisor = CopySupervisor(CopySpec("c-0", "c", tmp_path), tmp_path / "c-0", SupervisionSettings(), client)
        supervisor.url = "http://copy"
        assert supervisor.status().concurrency == 8
        assert await supervisor.ping()
        assert supervisor.status().concurrency == expected


@pytest.mark.anyio
@pytest.mark.parametrize(("settings", "expected"), [
    (ServerSettings(), 8),
    (ServerSettings(parallel=3), 3),
    (ServerSettings(parallel=16, max_concurrent_requests=4), 4),
    (ServerSettings(workers=4), 8),  # workers are a handler's; the engine runs its parallel sequences
])
async def test_a_ready_copy_on_the_engine_says_its_concurrency_on_ping(settings: ServerSettings,
                                                                       expected: int) -> None:
    async with app_client(settings=settings) as client:
        ping = await client.get("/ping")
    assert ping.status_code == 200 and ping.headers[CONCURRENCY_HEADER] == str(expected)
