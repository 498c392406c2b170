"""The gateway's HTTP client to copies, on loopback or a Ray node's address.

A request that could not be delivered (the copy refused or did not accept the connection) raises
CopyUnreachable, and only such a request may go to another copy: one that was sent may be running.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from pier.backends.base import CopyStatus
from pier.channel.copy_secret import copy_secret_header


class CopyUnreachable(Exception):
    """The request never reached the copy."""


class Upstream:
    def __init__(self, client: httpx.AsyncClient | None = None, *, connect_timeout_s: float = 2.0) -> None:
        self._owned = client is None
        self.client = client or httpx.AsyncClient(
            # No read timeout: deadlines are the caller's. No pool limit: admission bounds concurrency.
            timeout=httpx.Timeout(None, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
            trust_env=False,  # an HTTP(S)_PROXY meant for the internet must not capture loopback traffic
        )

    async def send(self, copy: CopyStatus, path: str, body: bytes, headers: Mapping[str, str], *,
                   method: str = "POST") -> httpx.Response:
        """Send (POST unless told) and return once the copy's status and headers arrived; read (or close) the body
        after."""
        if copy.url is None:
            raise CopyUnreachable(f"copy {copy.copy_id} has no address")
        request = self.client.build_request(
            method, copy.url.rstrip("/") + path, content=body,
            headers={**headers, "Accept-Encoding": "identity", **copy_secret_header(copy.secret)},
        )
        try:
            return await self.client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            raise CopyUnreachable(f"copy {copy.copy_id} at {copy.url}: {error or type(error).__name__}") from error

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()
