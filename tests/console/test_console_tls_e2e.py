"""The console over HTTPS: a `pier up --tls-cert --tls-key` gateway (a test CA's certificate), a real headless
Chromium that trusts that certificate's key and nothing else (Chromium's --ignore-certificate-errors-spki-list
pins it, rather than ignoring every certificate error), a deploy from the console, then a playground chat that
streams over TLS."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.certificates import Certificates, issue
from tests.console.browser import WIDE, chromium, missing
from tests.e2e.gateway_process import HttpsGatewayProcess
from tests.sockets import free_port
from tests.waiting import until

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

ENDPOINT, COMPONENT = "console-tls", "console-tls-tiny"
WAIT_MS = 90_000


def spki_pin(cert: Path) -> str:
    """What Chromium's --ignore-certificate-errors-spki-list takes: base64 of the SHA-256 of the public key."""
    public = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    spki = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return issue(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def gateway(certificates: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsGatewayProcess]:
    folder = tmp_path_factory.mktemp("pier")
    with HttpsGatewayProcess(folder / "state", free_port(), folder / "gateway.log", certificates) as process:
        yield process.wait_ready()


@pytest.fixture(scope="module")
def page(certificates: Certificates) -> Iterator[Any]:
    with chromium(f"--ignore-certificate-errors-spki-list={spki_pin(certificates.cert)}") as browser:
        context = browser.new_context(viewport=WIDE)
        opened = context.new_page()
        errors: list[str] = []
        opened.on("pageerror", lambda error: errors.append(str(error)))
        yield opened
        context.close()
        assert errors == [], errors


def test_the_console_deploys_and_chats_over_https(gateway: HttpsGatewayProcess, tiny_gguf: Path, tmp_path: Path,
                                                 page: Any) -> None:
    (tmp_path / "model.gguf").symlink_to(tiny_gguf)
    assert f"web console: {gateway.url}/console" in gateway.output()
    page.goto(f"{gateway.url}/console#/deploy")
    assert page.evaluate("[location.protocol, window.isSecureContext]") == ["https:", True]
    page.get_by_label("Deploy file (YAML)").fill(
        f"endpoint: {ENDPOINT}\ncomponents:\n  - name: {COMPONENT}\n    model: {{data: {tmp_path}}}\n"
        "    copies: 1\n    cpus: 1\n    memory_mb: 256\n")
    page.get_by_role("button", name="Deploy").click()
    page.get_by_text("Done: the endpoint is as the file says").wait_for(timeout=WAIT_MS)

    # the playground lists what /v1/models offers when it opens: components in service
    until(lambda: COMPONENT in httpx.get(gateway.url + "/v1/models", verify=gateway.verify).text,
          what="the component in service")
    page.goto(f"{gateway.url}/console#/playground")
    page.get_by_label("Model").select_option(COMPONENT)
    page.get_by_label("Max tokens").fill("16")
    page.get_by_label("Message").fill("hello over TLS")
    with page.expect_response(lambda r: r.url.endswith("/v1/chat/completions")) as answer:
        page.get_by_role("button", name="Send").click()
    assert answer.value.url.startswith("https://")
    assert answer.value.headers["content-type"].startswith("text/event-stream")
    page.locator(".chat li.assistant").first.wait_for(timeout=WAIT_MS)
    page.get_by_role("button", name="Send").wait_for(timeout=WAIT_MS)
    assert page.locator(".chat li.assistant").first.inner_text().strip()
