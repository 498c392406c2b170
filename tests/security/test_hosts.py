"""The Host/Origin decision, case by case (pure)."""

from __future__ import annotations

import pytest

from pier.security.hosts import HostPolicy, check_request, is_loopback, is_wildcard

DEFAULT = HostPolicy.of([])
MINE = HostPolicy.of(["pier.lan", "GPU-box"])
LISTED = HostPolicy.of([], ["http://localhost:3000", "HTTPS://Console.Example/"])


@pytest.mark.parametrize(
    ("host", "origin", "policy", "fetch_site", "refused"),
    [
        # loopback names and addresses, with or without a port
        ("localhost", None, DEFAULT, None, None),
        ("localhost:8080", None, DEFAULT, None, None),
        ("LOCALHOST.:8080", None, DEFAULT, None, None),
        ("127.0.0.1:8080", None, DEFAULT, None, None),
        ("127.8.9.10", None, DEFAULT, None, None),
        ("[::1]:8080", None, DEFAULT, None, None),
        # an IP address cannot come from DNS rebinding
        ("192.168.1.20:8080", None, DEFAULT, None, None),
        ("[fe80::1]:8080", None, DEFAULT, None, None),
        # DNS rebinding: the attacker's name
        ("evil.example", None, DEFAULT, None, "Host"),
        ("evil.example:8080", None, DEFAULT, None, "Host"),
        ("localhost.evil.example", None, DEFAULT, None, "Host"),
        ("127.0.0.1.nip.io", None, DEFAULT, None, "Host"),
        ("", None, DEFAULT, None, "Host"),
        (None, None, DEFAULT, None, "Host"),
        # names the user configured
        ("pier.lan:8080", None, MINE, None, None),
        ("gpu-box", None, MINE, None, None),
        ("evil.example", None, HostPolicy.of(["*"]), None, None),
        # Origin: pier's own page (the scheme://host:port the request went to)
        ("127.0.0.1:8080", "http://127.0.0.1:8080", DEFAULT, None, None),
        ("localhost", "http://localhost", DEFAULT, None, None),
        ("localhost:80", "http://localhost", DEFAULT, None, None),
        ("pier.lan", "https://pier.lan", MINE, None, None),
        # another loopback origin is not pier: a dev server, another port, another name for the same address
        ("127.0.0.1:8080", "http://localhost:3000", DEFAULT, None, "Origin"),
        ("localhost:8080", "http://localhost:3000", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "http://127.0.0.1:3000", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "http://localhost:8080", DEFAULT, None, "Origin"),
        ("pier.lan:8080", "http://pier.lan:9090", MINE, None, "Origin"),
        # origins the operator listed (--allow-origin), and only those
        ("127.0.0.1:8080", "http://localhost:3000", LISTED, None, None),
        ("127.0.0.1:8080", "https://console.example", LISTED, None, None),
        ("127.0.0.1:8080", "https://console.example:443", LISTED, None, None),
        ("127.0.0.1:8080", "http://console.example", LISTED, None, "Origin"),
        ("127.0.0.1:8080", "http://localhost:3001", LISTED, None, "Origin"),
        ("127.0.0.1:8080", "https://localhost:3000", LISTED, None, "Origin"),
        # a web page elsewhere (a simple text/plain POST carries Origin too)
        ("127.0.0.1:8080", "https://evil.example", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "http://evil.example:8080", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "null", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "file://", DEFAULT, None, "Origin"),
        ("127.0.0.1:8080", "http://192.168.1.9:8080", DEFAULT, None, "Origin"),
        ("pier.example", "https://evil.example", HostPolicy.of(["*"]), None, "Origin"),  # "*": any Host, not any Origin
        ("127.0.0.1:8080", "https://127.0.0.1:8080", DEFAULT, None, None),  # its own host:port, over TLS
        # no Origin, but the browser says cross-site (an <img> GET)
        ("127.0.0.1:8080", None, DEFAULT, "cross-site", "Sec-Fetch-Site"),
        ("127.0.0.1:8080", None, DEFAULT, "same-origin", None),
        ("127.0.0.1:8080", None, DEFAULT, "none", None),
    ],
)
def test_check_request(host: str | None, origin: str | None, policy: HostPolicy, fetch_site: str | None,
                       refused: str | None) -> None:
    refusal = check_request(host, origin, policy, fetch_site)
    assert (refusal.header if refusal else None) == refused


def test_a_refusal_says_how_to_allow_the_name() -> None:
    refusal = check_request("pier.example.com:8080", None, DEFAULT)
    assert refusal is not None and "--allow-host pier.example.com" in refusal.message
    refusal = check_request("127.0.0.1", "https://app.example.com", DEFAULT)
    assert refusal is not None and "--allow-origin https://app.example.com " in refusal.message


@pytest.mark.parametrize("origin", ["localhost:3000", "ftp://x.example", "null", "http://a.example/path",
                                    "http://user@a.example", ""])
def test_a_listed_origin_must_be_one(origin: str) -> None:
    if not origin:
        assert HostPolicy.of([], [origin]).origins == frozenset()  # blank entries (a trailing comma) are skipped
        return
    with pytest.raises(ValueError, match="is not an origin: give scheme://host"):
        HostPolicy.of([], [origin])


@pytest.mark.parametrize(("name", "loopback"), [("localhost", True), ("127.0.0.1", True), ("127.255.0.1", True),
                                                ("::1", True), ("[::1]", True), ("0.0.0.0", False),
                                                ("10.0.0.1", False), ("example.com", False), ("", False)])
def test_is_loopback(name: str, loopback: bool) -> None:
    assert is_loopback(name) is loopback


@pytest.mark.parametrize(("address", "wildcard"), [("0.0.0.0", True), ("::", True), ("[::]", True),
                                                   ("127.0.0.1", False), ("localhost", False)])
def test_is_wildcard(address: str, wildcard: bool) -> None:
    assert is_wildcard(address) is wildcard
