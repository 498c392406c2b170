"""Where the benchmark sends its requests: a TARGET (URL, route or pier endpoint name) made into one route URL."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from pier.bench.options import Api, BenchError
from pier.env import Env

# SageMaker's endpoint name rule: a bare name is an endpoint on the pier gateway.
ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
# Where a SageMaker runtime client is pointed, in the order boto3 reads them; pier's own first (PIER_URL: what
# every other `pier` command reads, and what `pier serve` on another port tells the user to set).
GATEWAY_VARIABLES = ("PIER_GATEWAY_URL", "PIER_URL", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", "AWS_ENDPOINT_URL")

ROUTES: dict[Api, str] = {
    Api.OPENAI_COMPLETIONS: "/v1/completions",
    Api.OPENAI_CHAT: "/v1/chat/completions",
    Api.TGI: "/generate_stream",
    Api.SAGEMAKER: "/invocations",
}
# Route suffixes that name their API, longest first so /v1/chat/completions is not read as /completions.
_SUFFIXES: tuple[tuple[str, Api, str], ...] = (
    ("/v1/chat/completions", Api.OPENAI_CHAT, "/v1/chat/completions"),
    ("/v1/completions", Api.OPENAI_COMPLETIONS, "/v1/completions"),
    ("/generate_stream", Api.TGI, "/generate_stream"),
    ("/generate", Api.TGI, "/generate_stream"),
    ("/invocations-response-stream", Api.SAGEMAKER, "/invocations-response-stream"),
    ("/invocations", Api.SAGEMAKER, "/invocations"),
)
_ENDPOINT_PATH = re.compile(r"^(?P<prefix>.*)/endpoints/(?P<name>[^/]+)/?$")


@dataclass(frozen=True)
class Subject:
    """One server under test: the URL every request goes to, its API, and the base for /v1/models, /tokenize."""

    label: str
    url: str
    api: Api
    base_url: str
    tokenizer_base: str | None = None  # where /tokenize is when not at base_url (an endpoint's, on a gateway)

    @property
    def tokenizer(self) -> str:
        """llama-server's /tokenize for this target (pier copies and gateways offer it too)."""
        return (self.tokenizer_base or self.base_url) + "/tokenize"


def resolve(target: str, api: Api | None, *, label: str, gateway: str | None = None) -> Subject:
    """Read TARGET as a pier endpoint name, a route URL (its path names the API) or a server's base URL."""
    if "://" not in target:
        return _endpoint(target, api, label, gateway)
    parts = urlsplit(target)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if match := _ENDPOINT_PATH.match(path):
        return _on_gateway(origin + match["prefix"], match["name"], api, label)
    for suffix, implied, route in _SUFFIXES:
        if path.endswith(suffix):
            _check_api(api, implied, target)
            base = origin + path[: -len(suffix)]
            return Subject(label, base + route, implied, base)
    base = origin + path.removesuffix("/v1")
    chosen = api or Api.OPENAI_COMPLETIONS
    return Subject(label, base + ROUTES[chosen], chosen, base)


def _endpoint(name: str, api: Api | None, label: str, gateway: str | None) -> Subject:
    if not ENDPOINT_NAME.match(name):
        raise BenchError(
            f"TARGET {name!r} is neither a URL nor an endpoint name. Give a server URL such as "
            "http://127.0.0.1:8080, a route such as http://host/v1/chat/completions, or a pier endpoint name."
        )
    url = gateway or Env().text(*GATEWAY_VARIABLES)
    if url is None:
        raise BenchError(
            f"{name!r} looks like a pier endpoint name, but no gateway URL is known: pass --gateway URL or set "
            f"{GATEWAY_VARIABLES[1]} (or {GATEWAY_VARIABLES[2]}, as for boto3)."
        )
    return _on_gateway(url.rstrip("/"), name, api, label)


def _on_gateway(base: str, name: str, api: Api | None, label: str) -> Subject:
    _check_api(api, Api.SAGEMAKER, name)
    return Subject(label, f"{base}/endpoints/{name}/invocations-response-stream", Api.SAGEMAKER, base,
                  tokenizer_base=f"{base}/endpoints/{name}")


def _check_api(given: Api | None, implied: Api, where: str) -> None:
    if given is not None and given is not implied:
        raise BenchError(
            f"{where} is a {implied.value} route but --api {given.value} was given: drop --api, or give the "
            "server's base URL so the route follows --api."
        )
