"""An endpoint's update and its variants in the console, in a real headless Chromium against a `pier up` gateway
with real copies of a TINY GGUF: the Endpoints page compares a production variant with its shadow by their own
CloudWatch metrics, starts a canary update that the page follows (canary, then done), and shows an update to a
model that cannot load as rolled back, with its reason."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.console.browser import chromium, missing, watched_page
from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.test_gateway_e2e import WAIT, clients
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

ENDPOINT = "live"
WAIT_MS = 120_000
BODY = json.dumps({"inputs": "the quick brown fox", "parameters": {"max_new_tokens": 2}})


@pytest.fixture(scope="module")
def gateway(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    (folder / "good").mkdir()
    (folder / "good" / "model.gguf").symlink_to(tiny_gguf)
    (folder / "broken").mkdir()
    (folder / "broken" / "model.gguf").write_bytes(b"GGUF" + b"\0" * 4096)  # a header and nothing a loader takes
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log") as process:
        process.wait_ready()
        sagemaker, _ = clients(process.url)
        for name, tokens in (("good", "512"), ("good-2", "768")):
            sagemaker.create_model(ModelName=name, PrimaryContainer={
                "ModelDataUrl": f"file://{folder / 'good'}", "Environment": {"MAX_TOTAL_TOKENS": tokens}})
        sagemaker.create_model(ModelName="broken", PrimaryContainer={"ModelDataUrl": f"file://{folder / 'broken'}"})
        sagemaker.create_endpoint_config(
            EndpointConfigName="shadowed",
            ProductionVariants=[variant("Main", "good")], ShadowProductionVariants=[variant("Shadow", "good-2")])
        sagemaker.create_endpoint_config(EndpointConfigName="canary", ProductionVariants=[variant("Green", "good-2")])
        sagemaker.create_endpoint_config(EndpointConfigName="broken", ProductionVariants=[variant("Blue", "broken")])
        sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName="shadowed")
        sagemaker.get_waiter("endpoint_in_service").wait(EndpointName=ENDPOINT, WaiterConfig=WAIT)
        yield process


def variant(name: str, model: str) -> dict[str, Any]:
    return {"VariantName": name, "ModelName": model, "InstanceType": "local", "InitialInstanceCount": 1,
            "InitialVariantWeight": 1.0}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    with watched_page(browser) as opened:
        yield opened


def test_a_shadow_variant_is_compared_with_production_by_its_own_metrics(gateway: GatewayProcess, page: Any) -> None:
    runtime = boto3.client("sagemaker-runtime", endpoint_url=gateway.url, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")
    for _ in range(3):
        answer = runtime.invoke_endpoint(EndpointName=ENDPOINT, ContentType="application/json", Body=BODY)
        assert answer["InvokedProductionVariant"] == "Main"  # the shadow's answers never reach the client
    page.goto(f"{gateway.url}/console#/endpoints")
    table = page.locator("table.variant-metrics")
    main, shadow = table.locator("tr[data-variant='Main']"), table.locator("tr[data-variant='Shadow']")
    main.locator(".invocations", has_text="3").wait_for(timeout=WAIT_MS)
    shadow.locator(".invocations", has_text="3").wait_for(timeout=WAIT_MS)  # weight 1 of 1: every request
    assert main.locator("td").nth(1).inner_text() == "production"
    assert shadow.locator("td").nth(1).inner_text() == "shadow"
    for row in (main, shadow):
        assert row.locator(".errors-5xx").inner_text() == "0"
        assert float(row.locator(".latency").inner_text()) > 0


def start_update(page: Any, config: str, shift: str, wait_s: str, percent: str | None = None) -> None:
    page.get_by_text(f"Update {ENDPOINT}", exact=True).click()
    page.get_by_label("New endpoint config").locator(f"option[value='{config}']").wait_for(
        state="attached", timeout=WAIT_MS)
    page.get_by_label("New endpoint config").select_option(config)
    page.get_by_label("Traffic shift").select_option(label=shift)
    if percent is not None:
        page.get_by_label("Canary size (% of capacity)").fill(percent)
    page.get_by_label("Wait between steps (s)" if percent else "Bake before the old fleet goes (s)").fill(wait_s)
    page.get_by_role("button", name="Start update").click()
    page.get_by_role("status").filter(has_text=f"Update to {config} started.").wait_for(timeout=WAIT_MS)


def test_a_canary_update_started_from_the_console_shows_its_progress(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/endpoints")
    page.get_by_role("heading", name=ENDPOINT).wait_for(timeout=WAIT_MS)
    start_update(page, "canary", "Canary", "15", percent="50")
    progress = page.get_by_role("status", name=f"Update of {ENDPOINT}")
    progress.locator(".phase", has_text="canary").wait_for(timeout=WAIT_MS)
    assert "Update to canary" in progress.inner_text()
    assert "50% of traffic moved" in progress.inner_text()
    sagemaker, _ = clients(gateway.url)
    until(lambda: sagemaker.describe_endpoint(EndpointName=ENDPOINT)["EndpointStatus"] == "InService",
          timeout=180, what="the update to complete")
    progress.wait_for(state="detached", timeout=WAIT_MS)  # done: nothing pending, nothing rolled back
    page.locator(".card", has_text="Config canary").wait_for(timeout=WAIT_MS)
    described = sagemaker.describe_endpoint(EndpointName=ENDPOINT)
    assert described["ProductionVariants"][0]["VariantName"] == "Green"
    assert described["LastDeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"] == {
        "Type": "CANARY", "WaitIntervalInSeconds": 15, "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 50}}


def test_an_update_that_cannot_become_healthy_shows_as_rolled_back(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/endpoints")
    page.get_by_role("heading", name=ENDPOINT).wait_for(timeout=WAIT_MS)
    before = clients(gateway.url)[0].describe_endpoint(EndpointName=ENDPOINT)["EndpointConfigName"]
    start_update(page, "broken", "All at once", "0")
    progress = page.get_by_role("status", name=f"Update of {ENDPOINT}")
    progress.locator(".phase", has_text="rolled back").wait_for(timeout=180_000)
    assert "The new fleet could not become healthy" in progress.locator(".reason").inner_text()
    assert page.locator(".card", has_text=f"Config {before}").count() == 1  # still on the old config
