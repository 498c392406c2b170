"""Which CAs the CLI and `pier bench` trust for an https:// gateway, and what they say when TLS is why a
connection failed: against real uvicorn servers, one over HTTPS with a test CA and one over plain HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from pier.client.pier_client import PierClient, PierClientError
from pier.security.client_trust import TrustError, ca_bundle, connection_problem, ssl_context
from tests.certificates import Certificates, issue
from tests.sockets import serving


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return issue(tmp_path_factory.mktemp("tls"))


def _app() -> FastAPI:
    app = FastAPI()
    app.add_api_route("/ping", lambda: {"ok": True})
    return app


@pytest.fixture(scope="module")
def https_url(certificates: Certificates) -> Iterator[str]:
    with serving(_app(), tls=certificates.pair) as url:
        yield url


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with serving(_app()) as url:
        yield url


@pytest.mark.parametrize(("given", "env", "chosen"), [
    (None, {}, None),  # the public CAs
    ("ca.pem", {"AWS_CA_BUNDLE": "x", "SSL_CERT_FILE": "x"}, "ca.pem"),  # --ca-bundle first
    (None, {"AWS_CA_BUNDLE": "ca.pem", "REQUESTS_CA_BUNDLE": "x", "SSL_CERT_FILE": "x"}, "ca.pem"),  # as boto3
    (None, {"AWS_CA_BUNDLE": "", "REQUESTS_CA_BUNDLE": "ca.pem", "SSL_CERT_FILE": "x"}, "ca.pem"),
    (None, {"SSL_CERT_FILE": "ca.pem"}, "ca.pem"),
])
def test_the_ca_bundle_comes_from_the_option_then_the_ecosystems_variables(
        certificates: Certificates, given: str | None, env: dict[str, str], chosen: str | None) -> None:
    def real(name: str | None) -> str | None:
        return str(certificates.ca) if name == "ca.pem" else name

    found = ca_bundle(real(given), {k: real(v) or "" for k, v in env.items()})
    assert found == (Path(real(chosen) or "") if chosen else None)


@pytest.mark.parametrize(("given", "env", "says"), [
    ("missing.pem", {}, "--ca-bundle missing.pem cannot be read (No such file or directory)"),
    (None, {"AWS_CA_BUNDLE": "missing.pem"}, "AWS_CA_BUNDLE missing.pem cannot be read"),
    ("key", {}, "holds no PEM certificate: give the CA's certificate"),
])
def test_a_ca_bundle_that_cannot_be_used_is_named(certificates: Certificates, given: str | None,
                                                  env: dict[str, str], says: str) -> None:
    with pytest.raises(TrustError, match=re.escape(says)):
        ca_bundle(str(certificates.key) if given == "key" else given, env)


def test_the_test_ca_is_trusted_only_when_given(certificates: Certificates, https_url: str) -> None:
    assert httpx.get(https_url + "/ping", verify=ssl_context(certificates.ca)).json() == {"ok": True}
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.get(https_url + "/ping", verify=ssl_context(None))  # certifi's public CAs
    problem = connection_problem(https_url, refused.value)
    assert problem is not None and "presents a certificate this machine does not trust" in problem
    assert "--ca-bundle FILE" in problem and "AWS_CA_BUNDLE" in problem


def test_a_wrong_scheme_is_named(https_url: str, http_url: str) -> None:
    with pytest.raises(httpx.ConnectError) as to_plain:
        httpx.get(http_url.replace("http://", "https://") + "/ping")
    assert "does not speak TLS" in (connection_problem(http_url.replace("http://", "https://"), to_plain.value)
                                    or "")
    plain = https_url.replace("https://", "http://")
    with pytest.raises(httpx.HTTPError) as to_tls:
        httpx.get(plain + "/ping")
    assert "use https://" in (connection_problem(plain, to_tls.value) or "")


def test_other_failures_are_not_blamed_on_tls(http_url: str) -> None:
    closed = "http://127.0.0.1:9"
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.get(closed + "/ping")
    assert connection_problem(closed, refused.value) is None


def test_the_pier_client_verifies_with_its_ca_bundle(certificates: Certificates, https_url: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    PierClient(https_url, ca_bundle_file=certificates.ca).ping()
    with pytest.raises(PierClientError, match="does not trust"):
        PierClient(https_url).ping()
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
    PierClient(https_url).ping()
    with pytest.raises(PierClientError, match=r"--ca-bundle missing\.pem cannot be read"):
        PierClient(https_url, ca_bundle_file=Path("missing.pem"))
