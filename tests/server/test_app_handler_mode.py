"""Bring-your-own-code mode: /ping follows the user's inference.py, /invocations runs it, errors keep
their status and name the exception. Uses the real HandlerService (worker processes)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from pier.channel.headers import CONCURRENCY_HEADER
from pier.server.app import create_handler_app
from pier.server.byoc.pool import HandlerService
from pier.server.settings import ServerSettings
from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.anyio

INFERENCE_PY = '''
import json

class BadInput(Exception):
    status_code = 400

def model_fn(model_dir):
    return {"greeting": "hello"}

def input_fn(body, content_type):
    data = json.loads(body)
    if "name" not in data:
        raise BadInput("send {\\"name\\": ...}")
    return data

def predict_fn(data, model):
    if data["name"] == "crash":
        raise ValueError("cannot greet crash")
    return {"text": model["greeting"] + " " + data["name"]}
'''


@pytest.fixture
def handler_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("SAGEMAKER_PROGRAM", raising=False)
    monkeypatch.delenv("SAGEMAKER_SUBMIT_DIRECTORY", raising=False)
    monkeypatch.setenv("PIER_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "model" / "code").mkdir(parents=True)
    (tmp_path / "model" / "code" / "inference.py").write_text(INFERENCE_PY)
    return tmp_path / "model"


@pytest.fixture
async def service(handler_dir: Path) -> AsyncIterator[HandlerService]:
    service = HandlerService(handler_dir, workers=1, timeout_s=20)
    yield service
    await service.stop()


async def call(service: HandlerService, method: str, path: str, **kwargs: object) -> httpx.Response:
    app = create_handler_app(ServerSettings(max_concurrent_requests=4), handler=service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
        return await client.request(method, path, **kwargs)  # type: ignore[arg-type]


async def test_ping_follows_the_handler(service: HandlerService) -> None:
    before = await call(service, "GET", "/ping")
    await service.start()
    after = await call(service, "GET", "/ping")
    assert before.status_code == 503 and "inference.py is still starting" in before.json()["message"]
    assert after.status_code == 200


async def test_invocations_run_the_users_code(service: HandlerService) -> None:
    await service.start()
    response = await call(service, "POST", "/invocations", json={"name": "pier"},
                          headers={"accept": "application/json"})
    assert response.status_code == 200 and response.json() == {"text": "hello pier"}
    assert response.headers["content-type"].startswith("application/json")


@pytest.mark.parametrize(("payload", "status", "fragment"), [
    ({"name": "crash"}, 500, "predict_fn raised ValueError: cannot greet crash"),
    ({"nom": "x"}, 400, "input_fn raised BadInput"),
])
async def test_handler_errors_keep_their_status_and_name_the_exception(
    service: HandlerService, payload: dict[str, str], status: int, fragment: str
) -> None:
    await service.start()
    response = await call(service, "POST", "/invocations", json=payload)
    assert response.status_code == status
    body = response.json()
    assert body["code"] == status and fragment in body["message"]


async def test_llm_routes_are_not_served_and_limits_still_apply(service: HandlerService) -> None:
    await service.start()
    chat = await call(service, "POST", "/v1/chat/completions", json={"messages": []})
    big = await call(service, "POST", "/invocations", content=b"x" * (6 * 1024 * 1024 + 1))
    assert chat.status_code == 404 and "runs the model's own code/inference.py" in chat.json()["message"]
    assert big.status_code == 413 and big.json()["code"] == 413


@pytest.mark.e2e
def test_the_container_runs_a_model_folders_inference_py(handler_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(handler_dir, tmp_path / "log", PIER_CACHE_DIR=str(tmp_path / "cache")) as server:
        server.wait_ready()
        response = httpx.post(server.url + "/invocations", content=json.dumps({"name": "sagemaker"}),
                              headers={"content-type": "application/json"})
        assert response.json() == {"text": "hello sagemaker"}
        server.terminate()
        assert server.wait(30) == 0


@pytest.mark.parametrize(("workers", "limit", "expected"), [(1, 4, 1), (3, 4, 3), (8, 4, 4)])
async def test_ping_says_the_copy_takes_as_many_requests_as_it_has_workers(
        service: HandlerService, workers: int, limit: int, expected: int) -> None:
    await service.start()
    app = create_handler_app(ServerSettings(max_concurrent_requests=limit, workers=workers), handler=service)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
        ping = await client.get("/ping")
    assert ping.status_code == 200 and ping.headers[CONCURRENCY_HEADER] == str(expected)
