"""The gateway serves the console's files: the page uncached, the hashed assets cached for good, every answer
with the CSP; nothing outside the build; and with keys in force the page still loads while the data needs a key."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pier.console.assets import ASSET_CACHE, CSP, NOT_BUILT, PAGE_CACHE, console_router
from pier.security.keystore import KeyStore
from pier.security.principal import Role
from tests.gateway.served import Served
from tests.waiting import until


def assets_of(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/console/assets/[^"]+)"', page)


@pytest.mark.parametrize("path", ["/console", "/console/"])
def test_the_page(served: Served, path: str) -> None:
    response = httpx.get(served.url + path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == PAGE_CACHE
    assert response.headers["content-security-policy"] == CSP
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "<script" in response.text and len(assets_of(response.text)) == 2  # the script and the stylesheet


def test_the_assets_are_cached_for_good(served: Served) -> None:
    for path in assets_of(httpx.get(served.url + "/console").text):
        response = httpx.get(served.url + path)
        assert response.status_code == 200
        assert response.headers["cache-control"] == ASSET_CACHE
        assert response.headers["content-security-policy"] == CSP
        kind = "javascript" if path.endswith(".js") else "css"
        assert kind in response.headers["content-type"]


@pytest.mark.parametrize("path", [
    "/console/assets/nothing.js",
    "/console/assets/..%2F..%2F__init__.py",
    "/console/assets/%2e%2e%2fstamp.py",
    "/console/assets/.hidden",
    "/console/source-digest.txt",
    "/console/index.html/x",
])
def test_nothing_outside_the_build(served: Served, path: str) -> None:
    response = httpx.get(served.url + path)
    assert response.status_code == 404
    assert "def " not in response.text and "import" not in response.text


def test_the_page_needs_no_key_but_the_data_does(served: Served) -> None:
    store = KeyStore.in_state_dir(served.state_dir)
    key = store.create("admin", Role.ADMIN)
    until(lambda: httpx.get(served.url + "/pier/copies").status_code != 200, what="keys in force")
    assert httpx.get(served.url + "/console").status_code == 200
    page = httpx.get(served.url + "/console").text
    assert all(httpx.get(served.url + path).status_code == 200 for path in assets_of(page))
    bearer = {"Authorization": f"Bearer {key.api_key}"}
    assert httpx.get(served.url + "/pier/metrics/summary", headers=bearer).status_code == 200
    assert httpx.get(served.url + "/pier/metrics/summary").status_code != 200
    assert httpx.post(served.url + "/pier/deploy", content="endpoint: x").status_code != 200


def test_a_page_on_another_site_cannot_use_it(served: Served) -> None:
    """The console's files are open, but the Host/Origin check still stands before them."""
    response = httpx.get(served.url + "/console", headers={"Host": "evil.example"})
    assert response.status_code in (400, 403) and "evil.example" in response.text


def test_an_installation_without_the_build_says_how_to_get_it(tmp_path: Path) -> None:
    app = FastAPI()
    app.include_router(console_router(tmp_path))
    with TestClient(app) as client:
        for path in ("/console", "/console/assets/index-x.js"):
            response = client.get(path)
            assert response.status_code == 404
            assert response.text == NOT_BUILT and "console/build.sh" in response.text
            assert response.headers["content-security-policy"] == CSP
