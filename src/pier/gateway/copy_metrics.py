"""The gateway's `GET /metrics`: every ready copy's own Prometheus metrics, scraped over the same network path
requests take (loopback, or a Ray node's address), each sample labelled with its `copy` and `component`; and
how many copies each component has in each state, from the backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from pier.backends.base import CopyState, CopyStatus
from pier.channel.copy_secret import copy_secret_header

SCRAPE_TIMEOUT_S = 2.0


async def scrape(client: httpx.AsyncClient, copies: Sequence[CopyStatus]) -> list[tuple[CopyStatus, str]]:
    """Each ready copy's /metrics text; a copy that does not answer in time is left out."""
    ready = [c for c in copies if c.state is CopyState.READY and c.url]

    async def one(copy: CopyStatus) -> tuple[CopyStatus, str] | None:
        assert copy.url is not None
        try:
            headers = copy_secret_header(copy.secret)
            response = await client.get(copy.url.rstrip("/") + "/metrics", headers=headers, timeout=SCRAPE_TIMEOUT_S)
        except httpx.HTTPError:
            return None
        return (copy, response.text) if response.status_code == 200 else None

    answers = await asyncio.gather(*(one(c) for c in ready))
    return [a for a in answers if a is not None]


def exposition(copies: Sequence[CopyStatus], scraped: Iterable[tuple[CopyStatus, str]]) -> tuple[bytes, str]:
    families: dict[str, Metric] = {}
    for copy, text in scraped:
        labels = {"copy": copy.copy_id, "component": copy.component}
        try:
            parsed = list(text_string_to_metric_families(text))
        except ValueError:  # not Prometheus text: nothing of this copy's is shown
            continue
        for family in parsed:
            merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type,
                                                               family.unit))
            if merged.type != family.type:
                continue
            merged.samples += [Sample(s.name, {**s.labels, **labels}, s.value, s.timestamp, s.exemplar)
                               for s in family.samples]
    counts = GaugeMetricFamily("pier_copies", "Copies the backend runs, by component and state.",
                               labels=["component", "state"])
    tally: dict[tuple[str, str], int] = {}
    for copy in copies:
        key = (copy.component, copy.state.value)
        tally[key] = tally.get(key, 0) + 1
    for (component, state), count in sorted(tally.items()):
        counts.add_metric([component, state], count)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed([counts, *families.values()]))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families
