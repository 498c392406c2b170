"""SigV4 verification against requests botocore signed (pure: no server). Each case changes one thing."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from unittest import mock
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from pier.security.bearer import open_sagemaker_token
from pier.security.errors import AuthFailure, IncompleteSignature, InvalidSignature
from pier.security.sigv4 import HttpRequest, from_header, from_query, verify
from tests.security.tokens import presigned_url, sagemaker_api_key

KEY, SECRET = "PIERTESTTESTTESTTEST", "s3cr3t-s3cr3t-s3cr3t"
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
URL = "http://127.0.0.1:8080/endpoints/my-endpoint/invocations"


def signed(url: str = URL, body: bytes = b'{"inputs": "hi"}', *, at: datetime = NOW, region: str = "us-east-1",
           headers: dict[str, str] | None = None) -> HttpRequest:
    """A request as botocore signs it, as the server receives it."""
    request = AWSRequest(method="POST", url=url, data=body, headers={
        "Content-Type": "application/json", "host": urlsplit(url).netloc, **(headers or {})})
    with mock.patch("botocore.auth.get_current_datetime", lambda *a, **k: at.replace(tzinfo=None)):
        SigV4Auth(Credentials(KEY, SECRET), "sagemaker", region).add_auth(request)
    parts = urlsplit(url)
    received = tuple((name.lower(), value) for name, value in request.headers.items())
    return HttpRequest("POST", parts.path, parts.query, received, body)


def check(request: HttpRequest, *, secret: str = SECRET, now: datetime = NOW) -> None:
    verify(request, from_header(request.header("authorization") or "", request), secret, now)


def with_header(request: HttpRequest, name: str, value: str) -> HttpRequest:
    headers = (*((k, v) for k, v in request.headers if k != name), (name, value))
    return dataclasses.replace(request, headers=headers)


def test_a_botocore_signature_verifies() -> None:
    check(signed())
    check(signed(region="eu-west-1"))
    check(signed(url=URL + "?a=1&b=two%20words"))
    check(signed(url="http://127.0.0.1:8080/endpoints/name%20with%20space/invocations"))  # encoded once more
    check(signed(body=b""))


Change = Callable[[HttpRequest], HttpRequest]


@pytest.mark.parametrize(
    ("change", "error", "words"),
    [
        (lambda r: dataclasses.replace(r, body=r.body + b" "), InvalidSignature, "does not match"),
        (lambda r: dataclasses.replace(r, method="PUT"), InvalidSignature, "does not match"),
        (lambda r: dataclasses.replace(r, raw_path="/endpoints/other/invocations"), InvalidSignature, "does not match"),
        (lambda r: dataclasses.replace(r, query="x=1"), InvalidSignature, "does not match"),
        (lambda r: with_header(r, "host", "evil.example"), InvalidSignature, "does not match"),
        (lambda r: with_header(r, "content-type", "text/plain"), InvalidSignature, "does not match"),
        (lambda r: with_header(r, "x-amz-date", "20250601T120001Z"), InvalidSignature, "does not match"),
        (lambda r: with_header(r, "authorization", r.header("authorization").replace("us-east-1", "us-west-2")),
         InvalidSignature, "does not match"),
        (lambda r: with_header(r, "x-amz-date", "yesterday"), IncompleteSignature, "X-Amz-Date"),
        (lambda r: dataclasses.replace(r, headers=tuple(h for h in r.headers if h[0] != "x-amz-date")),
         IncompleteSignature, "X-Amz-Date"),
        (lambda r: with_header(r, "authorization", "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request"),
         IncompleteSignature, "'SignedHeaders'"),
        (lambda r: with_header(r, "authorization", "AWS4-HMAC-SHA256 Credential=x, SignedHeaders=host, Signature=0"),
         IncompleteSignature, "Credential must be"),
        (lambda r: with_header(r, "authorization", "AWS4-ECDSA-P256-SHA256 Credential=x"), IncompleteSignature,
         "Unsupported signing algorithm"),
        (lambda r: with_header(r, "authorization", "AWS4-HMAC-SHA256 garbage"), IncompleteSignature,
         "missing equal-sign"),
    ],
)
def test_one_change_is_refused(change: Change, error: type[AuthFailure], words: str) -> None:
    with pytest.raises(error) as raised:
        check(change(signed()))
    assert words in raised.value.message


def test_a_wrong_secret_is_refused() -> None:
    with pytest.raises(InvalidSignature):
        check(signed(), secret="other")


def test_host_must_be_signed() -> None:
    request = signed()
    authorization = (request.header("authorization") or "").replace("host;", "")
    with pytest.raises(IncompleteSignature, match="host"):
        check(with_header(request, "authorization", authorization))


@pytest.mark.parametrize(("offset_s", "ok"), [(0, True), (299, True), (-299, True), (301, False), (-301, False)])
def test_the_five_minute_window(offset_s: int, ok: bool) -> None:
    request = signed(at=NOW + timedelta(seconds=offset_s))
    if ok:
        check(request)
        return
    with pytest.raises(InvalidSignature) as raised:
        check(request)
    signed_at = (NOW + timedelta(seconds=offset_s)).strftime("%Y%m%dT%H%M%SZ")
    if offset_s < 0:
        assert raised.value.message.startswith(
            f"Signature expired: {signed_at} is now earlier than 20250601T115500Z (20250601T120000Z - 5 min.)")
    else:
        assert raised.value.message.startswith(
            f"Signature not yet current: {signed_at} is still later than 20250601T120500Z (20250601T120000Z + 5 min.)")


def test_a_signed_content_hash_must_be_the_bodys() -> None:
    """botocore signs X-Amz-Content-SHA256's value in place of the body, so a body swapped under a signed hash, or
    an UNSIGNED-PAYLOAD, would verify; pier checks the hash against the body."""
    body = b'{"inputs": "hi"}'
    honest = signed(body=body, headers={"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()})
    check(honest)
    for request in (dataclasses.replace(honest, body=b'{"inputs": "rm -rf"}'),
                    signed(body=body, headers={"X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"})):
        with pytest.raises(InvalidSignature, match="x-amz-content-sha256"):
            check(request)


def presigned(url: str, *, at: datetime = NOW, expires_s: int = 300) -> HttpRequest:
    full = urlsplit(presigned_url(url, KEY, SECRET, signed_at=at.replace(tzinfo=None), expires_s=expires_s))
    return HttpRequest("GET", full.path, full.query, (("host", full.netloc),))


@pytest.mark.parametrize(("signed_ago_s", "ok"), [(0, True), (299, True), (301, False), (-299, True), (-301, False)])
def test_a_presigned_request_lives_until_it_expires(signed_ago_s: int, ok: bool) -> None:
    """X-Amz-Expires (300 s) after its date, and from 5 minutes (clock skew) before it."""
    request = presigned("http://127.0.0.1:8080/pier/copies?lines=5", at=NOW - timedelta(seconds=signed_ago_s))
    signature = from_query(request.query)
    if ok:
        verify(request, signature, SECRET, NOW)
    else:
        with pytest.raises(InvalidSignature, match=r"Signature (expired|not yet current)"):
            verify(request, signature, SECRET, NOW)


def test_a_presigned_request_signs_its_query() -> None:
    request = presigned("http://127.0.0.1:8080/pier/copies?lines=5")
    changed = dataclasses.replace(request, query=request.query.replace("lines=5", "lines=6"))
    with pytest.raises(InvalidSignature):
        verify(changed, from_query(changed.query), SECRET, NOW)


@pytest.mark.parametrize("expires", ["0", "604801", "soon"])
def test_presigned_expiry_must_be_sane(expires: str) -> None:
    request = presigned("http://127.0.0.1:8080/pier/copies")
    query = request.query.replace("X-Amz-Expires=300", f"X-Amz-Expires={expires}")
    with pytest.raises(IncompleteSignature, match="X-Amz-Expires"):
        from_query(query)


def test_a_sagemaker_api_key_opens_to_the_request_it_presigned() -> None:
    token = sagemaker_api_key(KEY, SECRET, region="eu-central-1", signed_at=NOW.replace(tzinfo=None))
    opened = open_sagemaker_token(token)
    assert opened.request.header("host") == "sagemaker.amazonaws.com"
    assert (opened.signature.region, opened.signature.expires_s) == ("eu-central-1", 43200)
    verify(opened.request, opened.signature, SECRET, NOW + timedelta(hours=11))
    with pytest.raises(InvalidSignature, match="expired"):
        verify(opened.request, opened.signature, SECRET, NOW + timedelta(hours=13))
    with pytest.raises(InvalidSignature, match="does not match"):
        verify(opened.request, opened.signature, "wrong", NOW)


def test_a_token_for_another_action_is_not_a_bearer_token() -> None:
    import base64

    url = presigned_url("https://sagemaker.amazonaws.com/?Action=DeleteEndpoint", KEY, SECRET)
    token = "sagemaker-api-key-" + base64.b64encode(url.removeprefix("https://").encode()).decode()
    with pytest.raises(IncompleteSignature, match="CallWithBearerToken"):
        open_sagemaker_token(token)
