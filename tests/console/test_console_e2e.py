"""The console in a real headless Chromium against a `pier up` gateway with real copies of a TINY random-weight
GGUF: deploy from a deploy file, the pages load, a playground chat streams, the copy count changes, a killed copy
shows as restarting then ready, and with keys the console asks for one and an invoke key only reads and invokes."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from pier.security.keystore import KeyStore
from pier.security.principal import Role
from tests.console.browser import PHONE, WIDE, chromium, missing, watched_page
from tests.e2e.gateway_process import GatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

ENDPOINT, COMPONENT = "console", "console-tiny"
WAIT_MS = 90_000


def deploy_file(model_dir: Path) -> str:
    return (f"endpoint: {ENDPOINT}\ncomponents:\n  - name: {COMPONENT}\n    model: {{data: {model_dir}}}\n"
            "    copies: 2\n    cpus: 1\n    memory_mb: 256\n")


@pytest.fixture(scope="module")
def model_dir(tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("model")
    (folder / "model.gguf").symlink_to(tiny_gguf)
    return folder


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    with GatewayProcess(folder / "state", free_port(), folder / "gateway.log") as process:
        yield process.wait_ready()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    with watched_page(browser) as opened:
        yield opened


def sagemaker(url: str) -> Any:
    return boto3.client("sagemaker", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")


def copies(url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    rows = httpx.get(f"{url}/pier/copies", headers=headers or {}).json()["copies"]
    return sorted((c for c in rows if c["component"] == COMPONENT), key=lambda c: c["copy_id"])


def test_deploy_from_a_deploy_file_then_the_endpoint_page_shows_it(gateway: GatewayProcess, model_dir: Path,
                                                                  page: Any) -> None:
    page.goto(f"{gateway.url}/console#/deploy")
    page.get_by_label("Deploy file (YAML)").fill("endpoint: x\ncomponents: []\n")
    page.get_by_role("button", name="Deploy").click()
    page.get_by_role("alert").filter(has_text="give either `model`").wait_for(timeout=WAIT_MS)
    page.get_by_label("Deploy file (YAML)").fill(deploy_file(model_dir))
    page.get_by_role("button", name="Deploy").click()
    page.get_by_text("Done: the endpoint is as the file says").wait_for(timeout=WAIT_MS)
    assert f"creating inference component {COMPONENT}" in page.locator(".steps").inner_text()

    page.get_by_role("navigation").get_by_role("link", name="Endpoints").click()
    row = page.locator("tr", has=page.get_by_role("link", name=COMPONENT))
    row.locator(".copies-count", has_text="2 / 2").wait_for(timeout=WAIT_MS)
    row.locator(".status", has_text="InService").wait_for(timeout=WAIT_MS)  # may follow the count by a tick
    described = sagemaker(gateway.url).describe_inference_component(InferenceComponentName=COMPONENT)
    assert described["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}


UNNAMED = """() => [...document.querySelectorAll('input, select, textarea, button')].filter((el) => {
    const labels = [...(el.labels || [])].map((l) => l.textContent.trim()).join('');
    return !(labels || el.getAttribute('aria-label') || (el.tagName === 'BUTTON' && el.textContent.trim()));
}).map((el) => el.outerHTML)"""


def test_pages_load_wide_and_on_a_phone(gateway: GatewayProcess, browser: Any) -> None:
    assert f"web console: {gateway.url}/console" in gateway.output()
    for viewport in (WIDE, PHONE):
        context = browser.new_context(viewport=viewport)
        page = context.new_page()
        page.goto(f"{gateway.url}/console#/copies")
        page.locator("tr[data-copy] .copy-state", has_text="Ready").first.wait_for(timeout=WAIT_MS)
        page.locator("tr[data-copy] .kernels", has_text="kernels").first.wait_for(timeout=WAIT_MS)  # as /ping says
        page.get_by_role("button", name="Show log").first.click()
        page.get_by_role("log").filter(has_text="starting copy").wait_for(timeout=WAIT_MS)
        for name in ("charts", "playground", "deploy", "bench", "endpoints"):
            page.goto(f"{gateway.url}/console#/{name}")
            page.get_by_role("heading", level=2).wait_for(timeout=WAIT_MS)
            if name == "charts":
                page.get_by_label("Charts of").wait_for(timeout=WAIT_MS)
                options = page.get_by_label("Charts of").locator("option").all_inner_texts()
                assert options == [ENDPOINT, COMPONENT]  # the endpoint (its components added up), the component
                assert page.locator("figure.chart").count() == 8
                assert page.locator("figure.chart canvas").count() == 8  # uPlot drew each
                assert page.locator("figure.chart", has_text="Engine steps (ms)").count() == 1
            assert page.evaluate(UNNAMED) == [], name  # every control has an accessible name
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"], name  # nothing overflows sideways, on a phone either
        context.close()


def test_the_keyboard_reaches_every_page(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/endpoints")
    page.get_by_role("heading", name="Endpoints and inference components").wait_for(timeout=WAIT_MS)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")  # past the skip link: the pages
    focused = [page.evaluate("document.activeElement.textContent")]
    for _ in range(5):
        page.keyboard.press("Tab")
        focused.append(page.evaluate("document.activeElement.textContent"))
    assert focused == ["Endpoints", "Copies", "Live charts", "Playground", "Deploy", "Bench results"]
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Bench results").wait_for(timeout=WAIT_MS)
    assert page.get_by_role("link", name="Bench results").get_attribute("aria-current") == "page"
    page.goto(f"{gateway.url}/console#/copies")
    page.reload()  # a fresh load: the focus at the start of the page
    page.get_by_role("heading", name="Copies").wait_for(timeout=WAIT_MS)
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the skip link: the focus goes to the page's content, the page stays
    assert page.evaluate("document.activeElement.id") == "main" and page.url.endswith("#/copies")


def test_a_playground_chat_streams_tokens(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/playground")
    page.get_by_label("Model").select_option(COMPONENT)
    page.get_by_label("Max tokens").fill("48")
    page.get_by_label("Message").fill("hello there")
    # Every change of the streamed answer's text, as the page renders it.
    page.evaluate("""() => {
        window.seen = [];
        new MutationObserver(() => {
            const answer = document.querySelector('.chat li.assistant .answer');
            const text = answer?.textContent;
            if (text && window.seen.at(-1) !== text) window.seen.push(text);
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    with page.expect_response(lambda r: r.url.endswith("/v1/chat/completions")) as answer:
        page.get_by_role("button", name="Send").click()
    assert answer.value.headers["content-type"].startswith("text/event-stream")
    page.locator(".chat li.assistant").first.wait_for(timeout=WAIT_MS)
    page.get_by_role("button", name="Send").wait_for(timeout=WAIT_MS)
    seen = page.evaluate("window.seen")
    final = page.locator(".chat li.assistant").first.inner_text()
    assert len(seen) >= 2, seen  # the answer grew in steps, not at once
    assert all(final.endswith(text) or text in final for text in seen)
    assert page.locator(".chat li.user").first.inner_text().endswith("hello there")
    page.get_by_text("Raw request").click()
    raw = page.locator("details", has_text="Raw request").locator("pre").inner_text()
    assert raw.startswith("POST /v1/chat/completions") and '"stream": true' in raw
    page.get_by_text("curl", exact=True).click()
    assert "/v1/chat/completions" in page.locator("details", has_text="curl").locator("pre").inner_text()


@pytest.mark.parametrize(("mode", "route"), [
    ("TGI payload (SageMaker runtime)", f"/endpoints/{ENDPOINT}/invocations-response-stream"),
    ("Completion (OpenAI)", "/v1/completions"),
])
def test_the_playground_streams_tgi_payloads_and_completions(gateway: GatewayProcess, page: Any, mode: str,
                                                             route: str) -> None:
    page.goto(f"{gateway.url}/console#/playground")
    page.get_by_label("Model").select_option(COMPONENT)
    page.get_by_label("API", exact=True).select_option(label=mode)
    page.get_by_label("Max tokens").fill("24")
    page.get_by_label("Prompt").fill("Once upon a time")
    with page.expect_response(lambda r: r.url.endswith(route)) as answer:
        page.get_by_role("button", name="Send").click()
    assert answer.value.status == 200
    page.get_by_role("button", name="Send").wait_for(timeout=WAIT_MS)
    assert page.locator("pre.answer").inner_text().strip()
    assert not page.get_by_role("alert").count()


def test_a_bad_request_shows_the_apis_message(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/playground")
    page.get_by_label("Model").select_option(COMPONENT)
    page.get_by_label("Max tokens").fill("100000000")
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    alert = page.get_by_role("alert")
    alert.wait_for(timeout=WAIT_MS)
    assert "max_tokens" in alert.inner_text() or "context" in alert.inner_text(), alert.inner_text()
    page.get_by_label("Max tokens").fill("8")  # the page goes on
    page.get_by_role("button", name="Send").click()
    page.locator(".chat li.assistant").first.wait_for(timeout=WAIT_MS)


def test_the_copy_count_changes_from_the_endpoints_page(gateway: GatewayProcess, page: Any) -> None:
    page.goto(f"{gateway.url}/console#/endpoints")
    page.get_by_label(f"Copies of {COMPONENT}").fill("1")
    page.get_by_role("button", name="Set").click()
    page.get_by_text("Asked for 1 copies.").wait_for(timeout=WAIT_MS)
    row = page.locator("tr", has=page.get_by_role("link", name=COMPONENT))
    row.locator(".copies-count", has_text="1 / 1").wait_for(timeout=WAIT_MS)
    until(lambda: len(copies(gateway.url)) == 1, what="one copy left")
    config = sagemaker(gateway.url).describe_inference_component(InferenceComponentName=COMPONENT)["RuntimeConfig"]
    assert config == {"DesiredCopyCount": 1, "CurrentCopyCount": 1}


def test_a_killed_copy_shows_restarting_then_ready(gateway: GatewayProcess, page: Any) -> None:
    victim = copies(gateway.url)[0]
    page.goto(f"{gateway.url}/console#/copies/{COMPONENT}")
    state = page.locator(f"tr[data-copy='{victim['copy_id']}'] .copy-state")
    state.filter(has_text="Ready").wait_for(timeout=WAIT_MS)
    page.evaluate("""(id) => {
        window.states = [];
        new MutationObserver(() => {
            const cell = document.querySelector(`tr[data-copy='${id}'] .copy-state`);
            if (cell && window.states.at(-1) !== cell.textContent) window.states.push(cell.textContent);
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""", victim["copy_id"])
    os.kill(victim["pid"], signal.SIGKILL)
    page.locator(f"tr[data-copy='{victim['copy_id']}'] .restarts", has_text="1").wait_for(timeout=WAIT_MS)
    state.filter(has_text="Ready").wait_for(timeout=WAIT_MS)
    states = page.evaluate("window.states")
    assert states[-1] == "Ready" and "Restarting" in states, states
    assert copies(gateway.url)[0]["pid"] != victim["pid"]


def test_with_keys_the_console_asks_for_one_and_an_invoke_key_only_invokes(gateway: GatewayProcess,
                                                                           page: Any) -> None:
    store = KeyStore.in_state_dir(gateway.state_dir)
    admin = store.create("console-admin", Role.ADMIN)
    invoke = store.create("console-invoke", Role.INVOKE)
    bearer = {"Authorization": f"Bearer {admin.api_key}"}
    until(lambda: httpx.get(f"{gateway.url}/pier/copies").status_code != 200, what="keys in force")

    page.goto(f"{gateway.url}/console")  # the page itself needs no key
    page.get_by_role("alert").filter(has_text="Paste an API key").wait_for(timeout=WAIT_MS)

    page.get_by_label("API key").fill(invoke.api_key)
    page.get_by_role("button", name="Use key").click()
    page.get_by_text("access: invoke").wait_for(timeout=WAIT_MS)
    links = page.get_by_role("navigation").get_by_role("link").all_inner_texts()
    assert links == ["Playground", "Bench results"]  # nothing that writes, nothing admin-only
    page.get_by_label("Model").select_option(COMPONENT)
    page.get_by_label("Message").fill("hello")
    page.get_by_role("button", name="Send").click()
    page.locator(".chat li.assistant").first.wait_for(timeout=WAIT_MS)
    # The server refuses a write with this key even when the page is made to send it.
    refused = page.evaluate("""async (key) => {
        const r = await fetch('/', {method: 'POST', body: JSON.stringify({InferenceComponentName: 'x',
            DesiredRuntimeConfig: {CopyCount: 3}}), headers: {'Authorization': `Bearer ${key}`,
            'X-Amz-Target': 'SageMaker.UpdateInferenceComponentRuntimeConfig',
            'Content-Type': 'application/x-amz-json-1.1'}});
        return [r.status, await r.text()];
    }""", invoke.api_key)
    assert refused[0] == 400 and "AccessDenied" in refused[1] and "admin" in refused[1], refused

    page.get_by_label("API key").fill(admin.api_key)
    page.get_by_role("button", name="Use key").click()
    page.get_by_text("access: admin").wait_for(timeout=WAIT_MS)
    page.get_by_role("navigation").get_by_role("link", name="Endpoints").click()
    page.get_by_role("link", name=COMPONENT).wait_for(timeout=WAIT_MS)
    assert len(copies(gateway.url, bearer)) == 1
