"""Secrets never leave where they belong: not in pier's logs (uvicorn's access log included), not in any response,
not in a file others may read. One gateway, every kind of credential used rightly and wrongly, then a scan."""

from __future__ import annotations

import asyncio
import json
import logging
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import openai
import pytest
import uvicorn

from pier.gateway.app import create_gateway
from tests.control.fakes import ServingBackend
from tests.runtime.servers import CopyServer
from tests.security.conftest import GENERATE, Secured, create_keys, model_folder
from tests.security.tokens import presigned_url, sagemaker_api_key
from tests.sockets import free_port

LOGGERS = ("pier", "uvicorn", "uvicorn.access", "uvicorn.error")


@pytest.fixture
def logged(tmp_path: Path, copy: CopyServer) -> Iterator[tuple[Secured, list[str]]]:
    """A gateway under uvicorn with its access log on, and every line pier and uvicorn log."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    state_dir = tmp_path / "state"
    keys = create_keys(state_dir)
    app = create_gateway(state_dir, backend=ServingBackend(copy.url), tick_s=0.05)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="debug",
                                           access_log=True, lifespan="on"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    handler = Collect(logging.DEBUG)
    for name in LOGGERS:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        yield Secured(f"http://127.0.0.1:{server.config.port}", state_dir, model_folder(tmp_path), keys), lines
    finally:
        for name in LOGGERS:
            logging.getLogger(name).removeHandler(handler)
        server.should_exit = True
        thread.join(10)


def test_no_secret_in_logs_responses_or_readable_files(logged: tuple[Secured, list[str]]) -> None:
    secured, lines = logged
    responses: list[str] = []
    secrets = _use_every_credential(secured, responses)
    assert any("GET /pier/copies?" in line for line in lines), "the access log was captured"
    assert any(line.startswith("audit principal=admin") for line in lines), "the audit log was captured"
    logs = "\n".join(lines)
    replies = "\n".join(responses)
    for name, secret in secrets.items():
        assert secret not in logs, f"{name} is in the log"
        assert secret not in replies, f"{name} is in a response"
    _check_files(secured.state_dir, secrets)


def _use_every_credential(secured: Secured, responses: list[str]) -> dict[str, str]:
    def record(http_response: Any, **_: Any) -> None:
        responses.append(f"{dict(http_response.headers)} {http_response.content!r}")

    def boto(service: str, who: str, secret: str | None = None) -> Any:
        client = secured.client(service, who, secret=secret)
        client.meta.events.register("after-call", record)
        return client

    http = httpx.Client(event_hooks={"response": [lambda r: responses.append(f"{dict(r.headers)} {r.read()!r}")]})
    admin, invoker = secured.keys["admin"], secured.keys["invoker"]
    secured.deploy("hygiene")
    body = json.dumps(GENERATE)
    boto("sagemaker-runtime", "invoker").invoke_endpoint(EndpointName="hygiene", ContentType="application/json",
                                                         Body=body)
    for client in (boto("sagemaker", "admin", "wrong-secret"), boto("sagemaker", "invoker")):
        with pytest.raises(Exception):  # noqa: B017 (ClientError: refused, and recorded)
            client.list_endpoints()
    chat = {"model": "hygiene", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    raw = openai.OpenAI(base_url=secured.url + "/v1", api_key=invoker.api_key, max_retries=0).chat.completions \
        .with_raw_response.create(model="hygiene", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    responses.append(f"{dict(raw.headers)} {raw.text}")
    http.post(secured.url + "/v1/chat/completions", json=chat, headers={"Authorization": "Bearer pier-wrong"})
    token = sagemaker_api_key(invoker.stored.access_key_id, invoker.secret_access_key)
    http.post(secured.url + "/v1/chat/completions", json=chat, headers={"Authorization": f"Bearer {token}"})
    url = presigned_url(secured.url + "/pier/copies", admin.stored.access_key_id, admin.secret_access_key)
    assert http.get(url).status_code == 200
    signature = parse_qs(urlsplit(url).query)["X-Amz-Signature"][0]
    return {"admin secret": admin.secret_access_key, "invoker secret": invoker.secret_access_key,
            "admin API key": admin.api_key, "invoker API key": invoker.api_key, "sagemaker-api-key": token,
            "presigned signature": signature}


def _check_files(state_dir: Path, secrets: dict[str, str]) -> None:
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((state_dir / "keys.json").stat().st_mode) == 0o600
    for path in state_dir.rglob("*"):
        if not path.is_file():
            continue
        content = path.read_bytes().decode("latin-1")
        for name in ("admin API key", "invoker API key", "sagemaker-api-key", "presigned signature"):
            assert secrets[name] not in content, f"{name} in {path}"  # kept nowhere, not even privately
        if stat.S_IMODE(path.stat().st_mode) & 0o044:  # readable by others (were the folder opened up)
            for name, secret in secrets.items():
                assert secret not in content, f"{name} in {path}, readable by others"
