"""Verifying AWS Signature Version 4, in the Authorization header or in the query string (presigned).

The expected signature is computed by botocore's own signer (`SigV4Auth` / `SigV4QueryAuth`: the canonical
request, the string to sign and the HMAC chain) over an `AWSRequest` rebuilt from what arrived: the method,
the path exactly as sent (botocore signs the percent-encoded path, encoding it once more), the query string,
only the headers the client signed, the body, and the client's own timestamp. Then it is compared in constant
time. Time: a header signature must be within AWS's 5-minute window of now; a presigned one lives from 5 minutes
before its X-Amz-Date until X-Amz-Expires after it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from pier.security.credentials import same_secret
from pier.security.errors import SIGNATURE_MISMATCH, IncompleteSignature, InvalidSignature

ALGORITHM = "AWS4-HMAC-SHA256"
TIMESTAMP = "%Y%m%dT%H%M%SZ"
SKEW = timedelta(minutes=5)
MAX_EXPIRES_S = 7 * 24 * 3600  # AWS's limit for a presigned request
CONTENT_SHA256 = "x-amz-content-sha256"


@dataclass(frozen=True)
class HttpRequest:
    """A request as it arrived, in the terms SigV4 signs."""

    method: str
    raw_path: str  # percent-encoded, as sent
    query: str  # raw, as sent
    headers: tuple[tuple[str, str], ...]  # (lower-case name, value), in order; repeated names repeat
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def values(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


@dataclass(frozen=True)
class Signature:
    """What a client claims: who signed, when, for which scope, over which headers."""

    access_key_id: str
    date: str  # YYYYMMDD of the credential scope
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str
    timestamp: str  # X-Amz-Date
    expires_s: int | None = None  # presigned only
    in_query: bool = False


def from_header(authorization: str, request: HttpRequest) -> Signature:
    """`AWS4-HMAC-SHA256 Credential=.../aws4_request, SignedHeaders=a;b, Signature=hex` and X-Amz-Date."""
    algorithm, _, rest = authorization.strip().partition(" ")
    _check_algorithm(algorithm)
    fields = dict(_pair(part) for part in rest.split(",") if part.strip())
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if not fields.get(name)]
    if missing:
        raise IncompleteSignature(" ".join(f"Authorization header requires '{name}' parameter." for name in missing))
    timestamp = request.header("x-amz-date")
    if not timestamp:
        raise IncompleteSignature("Authorization header requires existence of a 'X-Amz-Date' header (pier does not "
                                  "take the Date header instead).")
    return _signature(fields["Credential"], fields["SignedHeaders"], fields["Signature"], timestamp, None)


def from_query(query: str) -> Signature:
    """The X-Amz-* parameters of a presigned request."""
    fields = dict(parse_qsl(query, keep_blank_values=True))
    _check_algorithm(fields.get("X-Amz-Algorithm", ""))
    names = ("X-Amz-Credential", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Date", "X-Amz-Expires")
    missing = [name for name in names if not fields.get(name)]
    if missing:
        raise IncompleteSignature(f"A presigned request requires the query parameters {', '.join(missing)}.")
    try:
        expires = int(fields["X-Amz-Expires"])
    except ValueError:
        raise IncompleteSignature("X-Amz-Expires must be a number of seconds.") from None
    if not 1 <= expires <= MAX_EXPIRES_S:
        raise IncompleteSignature(f"X-Amz-Expires must be between 1 and {MAX_EXPIRES_S} seconds (a week).")
    return _signature(fields["X-Amz-Credential"], fields["X-Amz-SignedHeaders"], fields["X-Amz-Signature"],
                      fields["X-Amz-Date"], expires)


def verify(request: HttpRequest, signature: Signature, secret: str, now: datetime) -> None:
    """Raise InvalidSignature unless `signature` is the one `secret` makes for `request`, in time."""
    signed_at = _parse_timestamp(signature.timestamp)
    if signature.date != signature.timestamp[:8]:
        raise InvalidSignature(
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{signature.date}' != '{signature.timestamp[:8]}', from '{signature.timestamp}'.")
    _check_time(signature, signed_at, now)
    if "host" not in signature.signed_headers:
        raise IncompleteSignature("The host header must be signed (SignedHeaders must include host).")
    _check_payload_hash(request, signature)
    if not same_secret(signature.signature, expected_signature(request, signature, secret)):
        raise InvalidSignature(SIGNATURE_MISMATCH)


def expected_signature(request: HttpRequest, signature: Signature, secret: str) -> str:
    """botocore's signature for the request as the client must have built it."""
    credentials = Credentials(signature.access_key_id, secret)
    signer: SigV4Auth = (
        SigV4QueryAuth(credentials, signature.service, signature.region, expires=signature.expires_s)
        if signature.in_query else SigV4Auth(credentials, signature.service, signature.region)
    )
    rebuilt = AWSRequest(method=request.method, url=_url(request, signature), data=request.body)
    for name in signature.signed_headers:
        for value in request.values(name):
            rebuilt.headers[name] = value
    rebuilt.context["timestamp"] = signature.timestamp
    canonical = signer.canonical_request(rebuilt)
    return str(signer.signature(signer.string_to_sign(rebuilt, canonical), rebuilt))


def _url(request: HttpRequest, signature: Signature) -> str:
    query = request.query
    if signature.in_query:  # everything but the signature itself is signed
        query = "&".join(p for p in query.split("&") if p and not p.startswith("X-Amz-Signature="))
    host = request.header("host") or "localhost"
    return f"http://{host}{request.raw_path}" + (f"?{query}" if query else "")


def _check_algorithm(algorithm: str) -> None:
    if algorithm != ALGORITHM:
        raise IncompleteSignature(f"Unsupported signing algorithm {algorithm[:40]!r}: pier verifies {ALGORITHM} "
                                  "(Signature Version 4), what boto3 and the AWS SDKs use by default.")


def _pair(part: str) -> tuple[str, str]:
    name, equals, value = part.strip().partition("=")
    if not equals:
        raise IncompleteSignature(f"'{name[:40]}' is not a valid key=value pair (missing equal-sign) in the "
                                  "Authorization header.")
    return name, value


def _signature(credential: str, signed_headers: str, signature: str, timestamp: str, expires: int | None
               ) -> Signature:
    parts = credential.split("/")
    if len(parts) != 5 or parts[4] != "aws4_request" or not all(parts):
        raise IncompleteSignature(f"Credential must be ACCESS_KEY_ID/YYYYMMDD/REGION/SERVICE/aws4_request; got "
                                  f"{credential[:120]!r}.")
    key, date, region, service, _ = parts
    headers = tuple(signed_headers.split(";"))
    return Signature(key, date, region, service, headers, signature, timestamp, expires, expires is not None)


def _parse_timestamp(timestamp: str) -> datetime:
    try:
        return datetime.strptime(timestamp, TIMESTAMP).replace(tzinfo=UTC)
    except ValueError:
        raise IncompleteSignature(f"X-Amz-Date must look like 20240101T000000Z; got {timestamp[:40]!r}.") from None


def _check_time(signature: Signature, signed_at: datetime, now: datetime) -> None:
    stamp = now.strftime(TIMESTAMP)
    earliest = signed_at - SKEW
    if now < earliest:
        raise InvalidSignature(
            f"Signature not yet current: {signature.timestamp} is still later than "
            f"{(now + SKEW).strftime(TIMESTAMP)} ({stamp} + 5 min.) Check this machine's clock.")
    lifetime = timedelta(seconds=signature.expires_s) if signature.expires_s is not None else SKEW
    if now > signed_at + lifetime:
        what = f"{signature.expires_s} s" if signature.expires_s is not None else "5 min."
        raise InvalidSignature(
            f"Signature expired: {signature.timestamp} is now earlier than {(now - lifetime).strftime(TIMESTAMP)} "
            f"({stamp} - {what}) Sign the request again (check the client's clock).")


def _check_payload_hash(request: HttpRequest, signature: Signature) -> None:
    """A signed X-Amz-Content-SHA256 header stands in for the body in the signature, so it must be the body's
    hash: an UNSIGNED-PAYLOAD or a stale hash would let a body be changed under a valid signature."""
    if CONTENT_SHA256 not in signature.signed_headers:
        return  # botocore then hashes the body itself
    claimed = request.header(CONTENT_SHA256) or ""
    if claimed != hashlib.sha256(request.body).hexdigest():
        raise InvalidSignature("The provided 'x-amz-content-sha256' header does not match what was computed: pier "
                               "requires the SHA-256 of the body (UNSIGNED-PAYLOAD is not accepted).")
