"""Which Host and Origin headers pier answers: the defence against DNS rebinding and cross-site requests.

A web page the user visits can make the browser send requests to a pier on localhost in two ways:
- DNS rebinding: the page's own name (`evil.example`) is re-pointed at 127.0.0.1, so the browser treats pier
  as same-origin with the page. The request then carries `Host: evil.example`, a name pier does not answer to.
- A plain cross-origin request: the browser sends it (a "simple" POST with `text/plain` needs no preflight)
  but marks it with `Origin: https://evil.example`, which names neither pier nor a name the user configured.

So a request is served only when its Host names pier (a loopback name, an IP address, or a name the user
configured) and its Origin, when present, is pier's own (the scheme://host:port the request was sent to) or an
origin the operator listed (--allow-origin). Another loopback origin is no exception: a dev server on
http://localhost:3000 or a page opened from a file is not pier. An IP address in Host cannot
come from rebinding: the browser then *is* on that address's origin, and a page there would be pier's own.
This holds whether or not authentication is on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
ANY_HOST = "*"  # --allow-host '*': serve every Host (behind a proxy that checks it); Origin is still checked


@dataclass(frozen=True)
class HostPolicy:
    """The names, besides loopback ones and IP addresses, that pier answers to (lower case, no port)."""

    names: frozenset[str] = field(default_factory=frozenset)
    any_host: bool = False
    origins: frozenset[str] = field(default_factory=frozenset)  # trusted besides pier's own, as `origin_key` keeps them

    @classmethod
    def of(cls, names: Iterable[str], origins: Iterable[str] = ()) -> HostPolicy:
        """Raises ValueError for an origin that is not scheme://host[:port]."""
        cleaned = {_bare(name) for name in names if name.strip()}
        return cls(frozenset(cleaned - {ANY_HOST}), ANY_HOST in cleaned,
                   frozenset(_listed_origin(origin) for origin in origins if origin.strip()))

    def names_pier(self, name: str) -> bool:
        """A host name (no port) that pier answers to without a second thought."""
        return is_loopback(name) or name in self.names


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused, in words that say how to allow it if it was meant."""

    header: str  # "Host" or "Origin"
    message: str


def check_request(host: str | None, origin: str | None, policy: HostPolicy, fetch_site: str | None = None
                  ) -> Refusal | None:
    """None when the request may be served; else why not. Pure: headers in, decision out. `fetch_site` is the
    browser's Sec-Fetch-Site, which also marks the cross-site requests that carry no Origin (an <img> GET)."""
    if not host:
        return Refusal("Host", "The request has no Host header; send one that names this pier server.")
    name = _bare(host)
    if not (policy.any_host or policy.names_pier(name) or _is_ip(name)):
        return Refusal("Host", (
            f"This pier server does not answer to the host name {name!r} (a web page may be trying to reach it "
            "through DNS rebinding). Call it by a loopback name or its IP address, or, if this name is yours, "
            f"start pier with --allow-host {name} (or PIER_ALLOWED_HOSTS={name})."
        ))
    if origin is None:
        if fetch_site == "cross-site":
            return Refusal("Sec-Fetch-Site", "Cross-site requests from web pages are refused; call pier from a "
                                             "program, not a browser page.")
        return None
    if _same_origin(origin, host) or origin_key(origin) in policy.origins:
        return None
    listed = origin.strip().rstrip("/").lower() if origin_key(origin) else "ORIGIN"
    return Refusal("Origin", (
        f"Cross-origin requests from {origin!r} are refused: only pier's own pages and the origins its operator "
        "lists may call it from a browser. Call pier from a program (no Origin header), or, if that site is yours, "
        f"start pier with --allow-origin {listed} (or PIER_ALLOWED_ORIGINS={listed})."
    ))


def origin_key(origin: str) -> str:
    """scheme://host:port in lower case with the scheme's default port made explicit ("" for `null`, `file://`
    and anything else that is no http(s) origin), so equal origins compare equal."""
    parts = urlsplit(origin.strip())
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
        return ""
    if parts.query or parts.fragment or "@" in parts.netloc:
        return ""
    return f"{parts.scheme.lower()}://{_with_port(parts.netloc, parts.scheme.lower())}"


def is_loopback(name: str) -> bool:
    """localhost and its aliases, 127.0.0.0/8 and ::1 (a name without its port; IPv6 with or without [])."""
    bare = name.lower().strip("[]")
    if bare in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def is_wildcard(address: str) -> bool:
    """0.0.0.0 or ::: listen on every interface."""
    try:
        return ipaddress.ip_address(address.strip("[]")).is_unspecified
    except ValueError:
        return False


def _listed_origin(origin: str) -> str:
    key = origin_key(origin)
    if not key:
        raise ValueError(f"--allow-origin {origin!r} is not an origin: give scheme://host[:port], e.g. "
                         "https://pier.example or http://localhost:3000.")
    return key


def _same_origin(origin: str, host: str) -> bool:
    """The page was served by this very server: Origin's host:port is the request's Host."""
    parts = urlsplit(origin)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        return False
    return _with_port(parts.netloc, parts.scheme) == _with_port(host, parts.scheme)


def _with_port(netloc: str, scheme: str) -> str:
    default = "443" if scheme == "https" else "80"
    netloc = netloc.lower()
    if netloc.endswith("]") or ":" not in netloc.rsplit("]", 1)[-1]:
        return f"{netloc}:{default}"
    return netloc


def _bare(host: str) -> str:
    """The name in a Host header, without its port, lower case; IPv6 without its brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    if host.count(":") == 1:  # name:port (more colons: a bare IPv6 address)
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
