"""A stateful session survives a gateway restart: the sessions are in the state folder, and copy ids follow from
what a copy is, so the restarted gateway sends the session's calls to the same copy (real copy servers, boto3)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from fastapi import FastAPI, Request
from starlette.responses import Response

from pier.backends.base import CopySpec
from pier.gateway.app import create_gateway
from pier.gateway.state_files import SESSIONS
from tests.control.fakes import FakeBackend
from tests.gateway.served import classic_endpoint, sagemaker_client, wait_for
from tests.runtime.test_sessions import client
from tests.sockets import serving


def copy_app(name: str) -> FastAPI:
    app = FastAPI()

    @app.post("/invocations", response_model=None)
    async def invocations(request: Request) -> Response:
        await request.body()
        return Response(json.dumps({"copy": name}), media_type="application/json")

    return app


class TwoCopies(FakeBackend):
    """Copy n of a workload answers at the n-th server."""

    def __init__(self, urls: list[str]) -> None:
        super().__init__()
        self.urls = urls

    async def start(self, spec: CopySpec) -> None:
        await super().start(spec)
        ordinal = int(spec.copy_id.rsplit("-", 2)[-2])
        self.copies[spec.copy_id] = replace(self.copies[spec.copy_id], url=self.urls[ordinal])


@contextmanager
def gateway(state_dir: Path, urls: list[str]) -> Iterator[str]:
    with serving(create_gateway(state_dir, backend=TwoCopies(urls), tick_s=0.05), lifespan="on") as url:
        wait_for(lambda: sagemaker_client(url).describe_endpoint(EndpointName="llm")["EndpointStatus"] == "InService"
                 if sagemaker_client(url).list_endpoints()["Endpoints"] else True)
        yield url


def answered_by(url: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    answer = client(url).invoke_endpoint(EndpointName="llm", Body=b'{"inputs": "hi"}',
                                         ContentType="application/json", **extra)
    return json.loads(answer["Body"].read())["copy"], answer


@pytest.mark.parametrize("home", ["a", "b"])
def test_a_session_goes_to_its_copy_after_a_gateway_restart(tmp_path: Path, home: str) -> None:
    state_dir = tmp_path / "state"
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    with serving(copy_app("a")) as url_a, serving(copy_app("b")) as url_b:
        with gateway(state_dir, [url_a, url_b]) as url:
            classic_endpoint(url, model, "llm", instances=2)
            for _ in range(10):  # open sessions until one lands on `home`
                copy, opened = answered_by(url, SessionId="NEW_SESSION")
                if copy == home:
                    break
            assert copy == home
            match = re.fullmatch(r"([0-9a-f]{32}); Expires=.*", opened["NewSessionId"])
            assert match is not None
            session = match.group(1)
        stored = SESSIONS.check(state_dir / SESSIONS.name)
        assert stored.ok and f"session {session}" in stored.names

        with gateway(state_dir, [url_a, url_b]) as url:  # a new gateway on the same folder
            served = [answered_by(url, SessionId=session)[0] for _ in range(6)]
            assert served == [home] * 6  # without its session, calls would go to both copies
            assert {answered_by(url)[0] for _ in range(8)} == {"a", "b"}
            client(url).invoke_endpoint(EndpointName="llm", Body=b'{"requestType": "CLOSE"}',
                                        ContentType="application/json", SessionId=session)
        with gateway(state_dir, [url_a, url_b]) as url, pytest.raises(ClientError, match="is not open on endpoint"):
            answered_by(url, SessionId=session)  # a closed session stays closed


@pytest.mark.parametrize("damage", ["garbage", "folder"])
def test_a_damaged_sessions_file_is_served_without_and_said(tmp_path: Path, damage: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    model = tmp_path / "model"
    model.mkdir()
    (model / "m.gguf").write_bytes(b"GGUF")
    path = state_dir / SESSIONS.name
    if damage == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"\x17garbage\x00" * 512)
    with serving(copy_app("a")) as url_a, serving(copy_app("b")) as url_b, gateway(state_dir, [url_a, url_b]) as url:
        classic_endpoint(url, model, "llm", instances=2)
        home, opened = answered_by(url, SessionId="NEW_SESSION")
        session = opened["NewSessionId"].split(";", 1)[0]
        assert [answered_by(url, SessionId=session)[0] for _ in range(4)] == [home] * 4  # sessions still work
    said = " ".join(caplog.text.split())
    assert f"pier cannot use its state file {path}" in said and "serving without it" in said
    assert f"mv {path} {path}.damaged" in said
    assert path.is_dir() if damage == "folder" else path.read_bytes() == b"\x17garbage\x00" * 512  # left alone
