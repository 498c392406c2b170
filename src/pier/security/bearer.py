"""Bearer credentials: pier's own API keys, and the `sagemaker-api-key-` tokens of AWS's OpenAI-compatible
endpoints.

A `sagemaker-api-key-` token (what the sagemaker SDK's token generator makes) is the base64 of a SigV4-presigned
`POST https://sagemaker.amazonaws.com/?Action=CallWithBearerToken&X-Amz-...` with `&Version=1` appended after
the signature. It proves its holder had the access key's secret when it was made, until it expires (12 hours by
default): pier verifies it as the presigned request it is, whatever host it names.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from pier.security.errors import IncompleteSignature
from pier.security.sigv4 import HttpRequest, Signature, from_query

SAGEMAKER_TOKEN_PREFIX = "sagemaker-api-key-"
TOKEN_ACTION = "CallWithBearerToken"
TOKEN_VERSION_SUFFIX = "&Version=1"  # appended after signing: not part of what was signed


@dataclass(frozen=True)
class PresignedToken:
    """A sagemaker-api-key- token opened up: the request that was presigned, and its signature."""

    request: HttpRequest
    signature: Signature = field(repr=False)


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme is case-insensitive), else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def open_sagemaker_token(token: str) -> PresignedToken:
    encoded = token.removeprefix(SAGEMAKER_TOKEN_PREFIX)
    try:
        url = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        raise IncompleteSignature("The sagemaker-api-key- token is not base64 of a presigned URL; make a new one "
                                  "with the sagemaker SDK's token generator.") from None
    url = url.removesuffix(TOKEN_VERSION_SUFFIX)
    parts = urlsplit(url if "://" in url else f"https://{url}")
    if dict(parse_qsl(parts.query)).get("Action") != TOKEN_ACTION:
        raise IncompleteSignature(f"A sagemaker-api-key- token presigns Action={TOKEN_ACTION}; this one does not.")
    request = HttpRequest("POST", parts.path or "/", parts.query, (("host", parts.netloc),))
    return PresignedToken(request, from_query(parts.query))
