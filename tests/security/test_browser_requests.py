"""A web page cannot reach pier: a DNS-rebound Host and a cross-origin request (even a "simple" text/plain POST)
get 403 before any route runs, with or without keys, in the shape of the route's API."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from pier.security.settings import SecuritySettings
from tests.control.fakes import ServingBackend
from tests.security.conftest import GENERATE, Secured
from tests.sockets import serving

LIST_MODELS = {"X-Amz-Target": "SageMaker.ListModels", "Content-Type": "application/x-amz-json-1.1"}
CREATE_MODEL = {"X-Amz-Target": "SageMaker.CreateModel", "Content-Type": "application/x-amz-json-1.1"}


def test_a_rebound_host_cannot_create_a_model_even_without_keys(open_gateway: Secured) -> None:
    body = json.dumps({"ModelName": "rebound", "PrimaryContainer": {"ModelDataUrl": str(open_gateway.model_dir)}})
    reply = httpx.post(open_gateway.url, content=body, headers={**CREATE_MODEL, "Host": "evil.example"})
    assert reply.status_code == 403
    assert reply.json()["__type"] == "AccessDeniedException"
    assert "evil.example" in reply.json()["message"] and "--allow-host" in reply.json()["message"]
    assert open_gateway.client("sagemaker").list_models()["Models"] == []  # nothing was created


@pytest.mark.parametrize("path", ["/endpoints/e/invocations", "/v1/chat/completions", "/pier/copies", "/ping"])
def test_a_rebound_host_is_refused_on_every_route(open_gateway: Secured, path: str) -> None:
    reply = httpx.request("GET" if path.startswith(("/pier", "/ping")) else "POST", open_gateway.url + path,
                          content=b"{}", headers={"Host": "evil.example:8080"})
    assert reply.status_code == 403
    if path.startswith("/v1/"):
        assert reply.json()["error"]["code"] == "forbidden_origin"
    else:
        assert reply.headers["x-amzn-ErrorType"] == "AccessDeniedException"


def test_a_simple_cross_origin_post_is_refused_even_without_keys(open_gateway: Secured) -> None:
    """text/plain needs no CORS preflight: the browser sends it, marked with Origin."""
    open_gateway.deploy("victim")
    for path, body in [("/endpoints/victim/invocations", json.dumps(GENERATE)),
                       ("/v1/chat/completions", json.dumps({"model": "victim", "messages": [
                           {"role": "user", "content": "hi"}], "max_tokens": 2}))]:
        reply = httpx.post(open_gateway.url + path, content=body,
                           headers={"Content-Type": "text/plain", "Origin": "https://evil.example"})
        assert reply.status_code == 403, reply.text
        assert "evil.example" in reply.text
    same = httpx.post(open_gateway.url + "/endpoints/victim/invocations", content=json.dumps(GENERATE),
                      headers={"Content-Type": "application/json", "Origin": open_gateway.url})
    assert same.status_code == 200  # pier's own origin (a page it served) is not cross-origin


def test_host_and_origin_are_checked_before_credentials(secured: Secured) -> None:
    key = secured.keys["admin"].api_key
    reply = httpx.post(secured.url + "/v1/chat/completions", content=b"{}",
                       headers={"Authorization": f"Bearer {key}", "Origin": "null"})
    assert reply.status_code == 403
    assert reply.json()["error"]["code"] == "forbidden_origin"


def test_names_the_user_allows_are_served(tmp_path: Path) -> None:
    security = SecuritySettings.from_env({"PIER_ALLOWED_HOSTS": "pier.lan, other.lan"}, allowed_hosts=["gpu-box"])
    app = create_gateway(tmp_path / "state", backend=ServingBackend("http://127.0.0.1:9"),
                         settings=GatewaySettings(security=security))
    with serving(app) as url:
        for host, status in [("pier.lan", 200), ("gpu-box:8080", 200), ("OTHER.lan", 200), ("evil.example", 403),
                             ("10.1.2.3:8080", 200), ("[::1]:8080", 200)]:
            assert httpx.get(url + "/ping", headers={"Host": host}).status_code == status, host
        own_page = httpx.get(url + "/ping", headers={"Host": "pier.lan", "Origin": "http://pier.lan"})
        assert own_page.status_code == 200
        # a name pier answers to is not an origin it trusts: a page on another port of it is not pier's
        for origin in ("http://pier.lan:3000", "https://pier.lan:8443"):
            reply = httpx.get(url + "/ping", headers={"Host": "pier.lan", "Origin": origin})
            assert reply.status_code == 403, origin


def test_only_pier_s_own_origin_and_listed_ones_are_trusted(tmp_path: Path) -> None:
    security = SecuritySettings.from_env({"PIER_ALLOWED_ORIGINS": "https://console.example"},
                                         allowed_origins=["http://localhost:3000"])
    app = create_gateway(tmp_path / "state", backend=ServingBackend("http://127.0.0.1:9"),
                         settings=GatewaySettings(security=security))
    with serving(app) as url:
        port = url.rsplit(":", 1)[1]
        for origin, status in [(url, 200), ("http://localhost:3000", 200), ("https://console.example", 200),
                               ("http://localhost:3001", 403), (f"http://localhost:{port}", 403),
                               ("http://127.0.0.1:5173", 403), ("null", 403)]:
            reply = httpx.post(url + "/", headers={**LIST_MODELS, "Origin": origin}, content=b"{}")
            assert reply.status_code == status, (origin, reply.text)
        refused = httpx.post(url + "/", headers={**LIST_MODELS, "Origin": "http://localhost:3001"}, content=b"{}")
        assert refused.json()["__type"] == "AccessDeniedException"
        assert "--allow-origin http://localhost:3001" in refused.json()["message"]
