"""Who sent a request: the credential it carries (a SigV4 signature in a header or the query string, a pier
API key, a sagemaker-api-key- token), checked against the key store."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Protocol

from pier.security.bearer import SAGEMAKER_TOKEN_PREFIX, bearer_token, open_sagemaker_token
from pier.security.credential_scope import check_scope
from pier.security.errors import (
    HOW_TO_AUTHENTICATE,
    ExpiredKey,
    IncompleteSignature,
    MissingAuthenticationToken,
    UnrecognizedClient,
)
from pier.security.keystore import StoredKey
from pier.security.principal import Principal
from pier.security.sigv4 import ALGORITHM, HttpRequest, Signature, from_header, from_query, verify


class Keys(Protocol):
    def by_access_key(self, access_key_id: str) -> StoredKey | None: ...

    def by_api_key(self, api_key: str) -> StoredKey | None: ...


class Kind(StrEnum):
    SIGV4_HEADER = "sigv4-header"
    SIGV4_QUERY = "sigv4-query"
    API_KEY = "api-key"
    SAGEMAKER_TOKEN = "sagemaker-api-key"


@dataclass(frozen=True)
class Presented:
    """The credential a request carries, read from its headers and query before its body."""

    kind: Kind
    signature: Signature | None = None
    token: str = field(default="", repr=False)

    @property
    def needs_body(self) -> bool:
        """A SigV4 signature covers the body, so it cannot be checked before the body is read."""
        return self.kind in {Kind.SIGV4_HEADER, Kind.SIGV4_QUERY}


def presented(request: HttpRequest) -> Presented:
    authorization = request.header("authorization")
    in_query = "X-Amz-Algorithm=" in request.query or "X-Amz-Signature=" in request.query
    if authorization and in_query:
        raise IncompleteSignature("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the "
                                  "Authorization header should be specified.")
    if in_query:
        return Presented(Kind.SIGV4_QUERY, from_query(request.query))
    if not authorization:
        raise MissingAuthenticationToken()
    token = bearer_token(authorization)
    if token is not None:
        kind = Kind.SAGEMAKER_TOKEN if token.startswith(SAGEMAKER_TOKEN_PREFIX) else Kind.API_KEY
        return Presented(kind, token=token)
    if authorization.strip().startswith(ALGORITHM):
        return Presented(Kind.SIGV4_HEADER, from_header(authorization, request))
    scheme = authorization.strip().split(" ", 1)[0][:20]
    raise IncompleteSignature(f"Unsupported Authorization scheme {scheme!r}. {HOW_TO_AUTHENTICATE}")


def principal_of(credential: Presented, request: HttpRequest, keys: Keys, now: datetime, service: str) -> Principal:
    """The principal whose key made the credential; `request` must hold its body when `needs_body`. A signature
    must be scoped to `service` (the signing name of the API the route serves) and a real region."""
    if credential.kind is Kind.API_KEY:
        found = keys.by_api_key(credential.token)
        if found is None:
            raise UnrecognizedClient("API key")
        return _unexpired(found, now).principal
    if credential.kind is Kind.SAGEMAKER_TOKEN:
        token = open_sagemaker_token(credential.token)
        return _signed_by(token.request, token.signature, keys, now, service)
    assert credential.signature is not None
    return _signed_by(request, credential.signature, keys, now, service)


def _signed_by(request: HttpRequest, signature: Signature, keys: Keys, now: datetime, service: str) -> Principal:
    check_scope(signature.region, signature.service, service)
    found = keys.by_access_key(signature.access_key_id)
    if found is None:
        raise UnrecognizedClient()
    verify(request, signature, found.secret_access_key, now)
    return _unexpired(found, now).principal


def _unexpired(key: StoredKey, now: datetime) -> StoredKey:
    if key.expired(now.timestamp()):
        assert key.expires is not None
        raise ExpiredKey(key.principal.name, datetime.fromtimestamp(key.expires, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return key
