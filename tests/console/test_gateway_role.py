"""The console says which gateway it is among several on one state database (GET /pier): on the leader "this
gateway leads", on a follower who leads; a gateway alone on its folder says nothing. And a follower's Copies page
lists the leader's copies. Real headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pier.gateway.app import create_gateway
from tests.console.browser import chromium, missing, watched_page
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.gateway.test_state_url import gateways
from tests.postgres import PostgresServer
from tests.sockets import serving
from tests.waiting import until

pytestmark = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture
def page() -> Iterator[Any]:
    with chromium() as browser, watched_page(browser) as opened:
        yield opened


def about(url: str) -> dict[str, Any]:
    return httpx.get(url + "/pier").json()  # type: ignore[no-any-return]


def test_the_console_shows_leader_and_follower(tmp_path: Path, postgres_server: PostgresServer, page: Any) -> None:
    with gateways(tmp_path, postgres_server.database(), 2) as (one, two):
        until(lambda: {about(u)["role"] for u in (one, two)} == {"leader", "follower"}, timeout=20,
              what="a leader and a follower")
        leader, follower = (one, two) if about(one)["role"] == "leader" else (two, one)
        page.goto(f"{follower}/console")
        shown = page.locator(".gateway-role")
        shown.filter(has_text=f"follower; leader: {about(leader)['gateway']}").wait_for(timeout=10_000)
        assert shown.get_attribute("title") == f"this gateway: {about(follower)['gateway']}"
        page.goto(f"{leader}/console")
        page.locator(".gateway-role").filter(has_text="this gateway leads").wait_for(timeout=10_000)


def test_a_gateway_alone_on_its_folder_says_nothing(tmp_path: Path, page: Any) -> None:
    app = create_gateway(tmp_path / "state", backend=FakeBackend(), tick_s=0.05)
    with serving(app, lifespan="on") as url:
        page.goto(f"{url}/console")
        page.locator("header .role").filter(has_text="access:").wait_for(timeout=10_000)
        page.wait_for_timeout(500)  # /pier answered by now, and said "folder"
        assert page.locator(".gateway-role").count() == 0


def test_a_followers_copies_page_lists_the_leaders_copies(tmp_path: Path, postgres_server: PostgresServer,
                                                          page: Any) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    with gateways(tmp_path, postgres_server.database(), 2) as (one, two):
        until(lambda: {about(u)["role"] for u in (one, two)} == {"leader", "follower"}, timeout=20,
              what="a leader and a follower")
        follower = two if about(one)["role"] == "leader" else one
        sagemaker = sagemaker_client(follower)
        sagemaker.create_model(ModelName="m", PrimaryContainer={"ModelDataUrl": str(model)})
        sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "local", "InitialInstanceCount": 1}])
        sagemaker.create_endpoint(EndpointName="e", EndpointConfigName="c")
        page.goto(f"{follower}/console#/copies")
        row = page.locator("tr[data-copy]")
        row.filter(has_text="e/AllTraffic").wait_for(timeout=20_000)
        assert row.count() == 1 and row.locator(".copy-state").inner_text() == "Ready"
