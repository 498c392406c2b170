"""The model server's own guards: TGI's API_KEY on a standalone container, and the per-copy secret that makes a
copy answer only its gateway. In process over the fake engine, then as real processes on a TINY GGUF."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import openai
import pytest

from pier.engine.engine import Engine
from pier.engine.engine_config import EngineConfig
from pier.engine.fake import FakeRunner
from pier.runtime.upstream import Upstream
from pier.server.app import create_app
from pier.server.middleware.model_server_guard import guard_model_server
from pier.server.settings import ServerSettings
from tests.backends.conftest import backend_running, spec
from tests.security.conftest import chat
from tests.server.processes import ContainerProcess
from tests.sockets import serving

GENERATE = {"inputs": "the cat", "parameters": {"max_new_tokens": 2}}
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@contextmanager
def model_server(env: dict[str, str]) -> Iterator[str]:
    engine = Engine(FakeRunner(n_ctx=1024), EngineConfig(max_running=2, step_tokens=64)).start()
    try:
        app = create_app(ServerSettings(model_name="fake-model"), engine=engine)
        guard_model_server(app, env)
        with serving(app) as url:
            yield url
    finally:
        engine.stop()


def test_api_key_guards_everything_but_health_checks() -> None:
    with model_server({"API_KEY": "tgi-style-key"}) as url:
        assert httpx.get(url + "/ping").status_code == 200
        assert httpx.get(url + "/health").status_code == 200
        for path, body, shape in [("/generate", GENERATE, "tgi"), ("/invocations", GENERATE, "tgi"),
                                  ("/v1/chat/completions", CHAT, "openai"), ("/metrics", None, "tgi")]:
            method = "GET" if body is None else "POST"
            refused = httpx.request(method, url + path, json=body)
            assert refused.status_code == 401, path
            error = refused.json()
            assert (error["error"]["code"] == "invalid_api_key") if shape == "openai" else (
                error["error_type"] == "unauthorized"), error
            wrong = httpx.request(method, url + path, json=body, headers={"Authorization": "Bearer tgi-style-kez"})
            assert wrong.status_code == 401
            right = httpx.request(method, url + path, json=body, headers={"Authorization": "Bearer tgi-style-key"})
            assert right.status_code == 200, right.text


def test_the_openai_client_with_the_container_api_key() -> None:
    with model_server({"API_KEY": "k-123"}) as url:
        good = openai.OpenAI(base_url=url + "/v1", api_key="k-123", max_retries=0)
        assert chat(good, "fake-model").choices
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url + "/v1", api_key="nope", max_retries=0).models.list()


def test_without_api_key_the_container_keeps_sagemakers_contract() -> None:
    with model_server({}) as url:
        assert httpx.post(url + "/invocations", json=GENERATE).status_code == 200


def test_a_copy_secret_admits_only_its_gateway_and_wins_over_api_key() -> None:
    with model_server({"PIER_COPY_SECRET": "copy-secret", "API_KEY": "ignored"}) as url:
        assert httpx.get(url + "/ping").status_code == 200
        assert httpx.get(url + "/metrics").status_code == 403  # its counters name its models and traffic
        scraped = httpx.get(url + "/metrics", headers={"X-Pier-Copy-Secret": "copy-secret"})
        assert scraped.status_code == 200 and "pier_http_requests_total" in scraped.text
        refused = httpx.post(url + "/invocations", json=GENERATE, headers={"Authorization": "Bearer ignored"})
        assert refused.status_code == 403 and "gateway" in refused.json()["error"]
        admitted = httpx.post(url + "/invocations", json=GENERATE, headers={"X-Pier-Copy-Secret": "copy-secret"})
        assert admitted.status_code == 200


@pytest.mark.e2e
def test_pier_container_honours_api_key(model_dir: Path, tmp_path: Path) -> None:
    with ContainerProcess(model_dir, tmp_path / "server.log", HF_MODEL_ID="tiny", API_KEY="secret-key-1") as server:
        server.wait_ready()
        assert httpx.post(server.url + "/generate", json=GENERATE, timeout=30).status_code == 401
        reply = httpx.post(server.url + "/generate", json=GENERATE, timeout=30,
                           headers={"Authorization": "Bearer secret-key-1"})
        assert reply.status_code == 200 and reply.json()["generated_text"] is not None
        assert "secret-key-1" not in server.output()


@pytest.mark.e2e
def test_a_local_copy_answers_only_requests_with_its_secret(model_dir: Path, tmp_path: Path) -> None:
    with backend_running(tmp_path / "state") as running:
        running.loop.run(running.backend.start(spec("c1", model_dir)))
        running.wait_ready("c1")
        status = running.status("c1")
        assert status.url and status.secret and status.secret not in repr(status)
        body = json.dumps(GENERATE).encode()
        assert httpx.post(status.url + "/invocations", content=body, timeout=30).status_code == 403
        upstream = Upstream()

        async def forward() -> int:
            response = await upstream.send(status, "/invocations", body, {"Content-Type": "application/json"})
            await response.aread()
            await upstream.aclose()
            return response.status_code

        assert asyncio.run(forward()) == 200  # the gateway's forwarder sends the secret
        assert status.pid is not None
        launcher_argv = Path(f"/proc/{status.pid}/cmdline").read_bytes()
        assert status.secret.encode() not in launcher_argv  # in the environment, which other users cannot read
        assert status.secret not in running.backend.logs("c1")
