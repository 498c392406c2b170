from __future__ import annotations

import pytest

from pier.bench.options import Api, BenchError
from pier.bench.subject import resolve


@pytest.mark.parametrize(
    ("target", "api", "url", "expected_api", "base"),
    [
        ("http://h:8080", None, "http://h:8080/v1/completions", Api.OPENAI_COMPLETIONS, "http://h:8080"),
        ("http://h:8080/", Api.OPENAI_CHAT, "http://h:8080/v1/chat/completions", Api.OPENAI_CHAT, "http://h:8080"),
        ("http://h:8080/v1", None, "http://h:8080/v1/completions", Api.OPENAI_COMPLETIONS, "http://h:8080"),
        ("http://h/v1/chat/completions", None, "http://h/v1/chat/completions", Api.OPENAI_CHAT, "http://h"),
        ("http://h/v1/completions", None, "http://h/v1/completions", Api.OPENAI_COMPLETIONS, "http://h"),
        ("http://h/generate", None, "http://h/generate_stream", Api.TGI, "http://h"),
        ("http://h:80", Api.TGI, "http://h:80/generate_stream", Api.TGI, "http://h:80"),
        ("http://h/invocations", None, "http://h/invocations", Api.SAGEMAKER, "http://h"),
        (
            "http://h/proxy/v1/completions",
            None,
            "http://h/proxy/v1/completions",
            Api.OPENAI_COMPLETIONS,
            "http://h/proxy",
        ),
        (
            "http://gw/endpoints/my-llm",
            None,
            "http://gw/endpoints/my-llm/invocations-response-stream",
            Api.SAGEMAKER,
            "http://gw",
        ),
        (
            "http://gw/endpoints/my-llm/invocations-response-stream",
            Api.SAGEMAKER,
            "http://gw/endpoints/my-llm/invocations-response-stream",
            Api.SAGEMAKER,
            "http://gw/endpoints/my-llm",
        ),
    ],
)
def test_resolve(target: str, api: Api | None, url: str, expected_api: Api, base: str) -> None:
    resolved = resolve(target, api, label="x")
    assert (resolved.url, resolved.api, resolved.base_url) == (url, expected_api, base)


def test_endpoint_name_goes_to_the_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "http://127.0.0.1:9000/")
    monkeypatch.delenv("PIER_GATEWAY_URL", raising=False)
    resolved = resolve("my-llm", None, label="x")
    assert resolved.url == "http://127.0.0.1:9000/endpoints/my-llm/invocations-response-stream"
    assert resolve("my-llm", None, label="x", gateway="http://gw").url.startswith("http://gw/endpoints/my-llm/")


def test_endpoint_name_without_gateway_says_how_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PIER_GATEWAY_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BenchError, match="--gateway"):
        resolve("my-llm", None, label="x")


@pytest.mark.parametrize(
    ("target", "api", "message"),
    [
        ("http://h/v1/chat/completions", Api.TGI, "drop --api"),
        ("not a url!", None, "neither a URL nor an endpoint name"),
    ],
)
def test_resolve_refuses(target: str, api: Api | None, message: str) -> None:
    with pytest.raises(BenchError, match=message):
        resolve(target, api, label="x")


def test_an_endpoint_name_finds_the_gateway_the_other_commands_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """`pier serve` on another port says PIER_URL=...; docs/security.md names it for `pier bench` too."""
    for name in ("PIER_GATEWAY_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIER_URL", "http://127.0.0.1:18080")
    assert resolve("my-llm", None, label="x").url.startswith("http://127.0.0.1:18080/endpoints/my-llm/")
