"""The gateway's HTTP client to copies, on loopback or a Ray node's address.

A request that could not be delivered (the copy refused or did not accept the connection) raises
CopyUnreachable, and only such a request may go to another copy: one that was sent may be running.
"""

from __future__ import annotations

import http.cookiejar
from collections.abc import Mapping
from typing import Any

import httpx

from pier.backends.base import CopyStatus
from pier.channel.copy_secret import copy_secret_header


class CopyUnreachable(Exception):
    """The request never reached the copy."""


class _NoCookies(http.cookiejar.DefaultCookiePolicy):
    """A copy's cookies (a bring-your-own handler may set some) belong to the client that got that answer: the
    gateway's one client to every copy keeps none, so none rides on another client's request."""

    def set_ok(self, cookie: http.cookiejar.Cookie, request: Any) -> bool:
        return False


class Upstream:
    def __init__(self, client: httpx.AsyncClient | None = None, *, connect_timeout_s: float = 2.0) -> None:
        self._owned = client is None
        self.client = client or httpx.AsyncClient(
            # No read timeout: deadlines are the caller's. No pool limit: admission bounds concurrency.
            timeout=httpx.Timeout(None, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=256),
            trust_env=False,  # an HTTP(S)_PROXY meant for the internet must not capture loopback traffic
        )
        self.client.cookies.jar.set_policy(_NoCookies())

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
