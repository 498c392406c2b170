"""Where `pier bench` reads a target's engine step times (bench/engine_steps.py): a pier model server's own
`/metrics`, or a pier gateway's, limited to the copies of the endpoint under test (a gateway's `/pier/copies` says
which: a copy's instance is "<endpoint>/<variant>#<index>"). A server without those histograms (llama-server, vLLM,
a gateway that refuses the caller) has no source, and its runs carry no engine figures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from pier.bench.copies import copies_url, gateway_copies
from pier.bench.engine_steps import Histograms, histograms
from pier.bench.subject import Subject

TIMEOUT_S = 5.0
_ENDPOINT_IN_PATH = re.compile(r"/endpoints/(?P<name>[^/]+)")


@dataclass(frozen=True)
class StepSource:
    http: httpx.AsyncClient
    metrics_url: str
    components: frozenset[str] | None  # on a gateway: the endpoint's copies' components; None on a model server

    @classmethod
    async def find(cls, http: httpx.AsyncClient, target: Subject, model: str | None) -> StepSource | None:
        """The target's source of step times, or None when it exposes none."""
        parts = urlsplit(target.base_url)
        origin = f"{parts.scheme}://{parts.netloc}"
        copies = await gateway_copies(http, copies_url(origin))
        if copies is None:  # a model server: its own /metrics
            source = cls(http, target.base_url.rstrip("/") + "/metrics", None)
        else:
            named = _ENDPOINT_IN_PATH.search(urlsplit(target.url).path)
            name = named["name"] if named else model
            if not name:
                return None
            source = cls(http, origin + "/metrics", components_of(copies, name))
        return source if await source.read() else None

    async def read(self) -> Histograms:
        """The step histograms now; empty when the server does not answer with them."""
        try:
            response = await self.http.get(self.metrics_url, timeout=TIMEOUT_S)
        except httpx.HTTPError:
            return {}
        return histograms(response.text, self.components) if response.status_code == 200 else {}


def components_of(copies: list[dict[str, Any]], name: str) -> frozenset[str]:
    """The components whose copies serve `name`: an endpoint (its instances are "<name>/<variant>#<i>") or one
    inference component called so."""
    out = set()
    for copy in copies:
        component, instance = copy.get("component"), copy.get("instance")
        if component == name or (isinstance(instance, str) and instance.startswith(f"{name}/")):
            out.add(str(component))
    return frozenset(out)
