"""Copy counts over time while a benchmark runs against a pier gateway: `/pier/copies` polled every second, the
ready copies counted per component. Any other server (no such route) is simply not watched."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

POLL_S = 1.0
POLL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class CopySample:
    at_s: float  # seconds after the run started
    ready: dict[str, int]  # ready copies by component


@dataclass
class CopyWatcher:
    http: httpx.AsyncClient
    url: str  # the gateway's /pier/copies
    started: float  # time.perf_counter() at the run's start
    samples: list[CopySample] = field(default_factory=list)

    @classmethod
    def of(cls, http: httpx.AsyncClient, target_url: str, started: float) -> CopyWatcher:
        return cls(http, copies_url(target_url), started)

    async def sample(self) -> bool:
        """One sample; False when the target is not a pier gateway (or did not answer)."""
        copies = await gateway_copies(self.http, self.url)
        if copies is None:
            return False
        ready = Counter(str(c.get("component")) for c in copies if c.get("state") == "Ready")
        self.samples.append(CopySample(time.perf_counter() - self.started, dict(ready)))
        return True

    async def run(self) -> None:
        """Sample until cancelled (stops at once if the first sample shows no pier gateway)."""
        if not await self.sample():
            return
        while True:
            await asyncio.sleep(POLL_S)
            with contextlib.suppress(Exception):
                await self.sample()


def copies_url(target_url: str) -> str:
    """The `/pier/copies` of the gateway a target URL is on."""
    parts = urlsplit(target_url)
    return f"{parts.scheme}://{parts.netloc}/pier/copies"


async def copy_kernels(http: httpx.AsyncClient, target_url: str) -> list[dict[str, Any]] | None:
    """Each copy of a pier gateway with the CPU kernels it computes with (None: not a pier gateway)."""
    copies = await gateway_copies(http, copies_url(target_url))
    if copies is None:
        return None
    return [{"copy": c.get("copy_id"), "serves": c.get("component"), "device": c.get("device"),
             "kernels": c.get("kernels")} for c in copies]


async def gateway_copies(http: httpx.AsyncClient, url: str) -> list[dict[str, Any]] | None:
    """The copies a gateway's `/pier/copies` lists; None when the server is not a pier gateway (or does not let
    this caller see them, or did not answer)."""
    try:
        response = await http.get(url, timeout=POLL_TIMEOUT_S)
        copies = response.json()["copies"] if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None
    return [c for c in copies if isinstance(c, dict)] if isinstance(copies, list) else None
