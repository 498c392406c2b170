"""Why a request is refused before it reaches the gateway's routes, with AWS's codes and statuses.

botocore reads a JSON 1.1 error's code from `__type` in the body and a rest-json error's from the
`x-amzn-ErrorType` header; statuses follow AWS: authentication failures are 403 (IncompleteSignature 400),
AccessDenied is 400 on JSON 1.1 services and 403 on rest services. OpenAI clients get 401 for a missing or
wrong credential and 403 for one that may not do what it asked.
"""

from __future__ import annotations

from typing import ClassVar

SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)
HOW_TO_AUTHENTICATE = (
    "Sign requests with an access key from `pier keys create NAME --role ROLE` (boto3: aws_access_key_id and "
    "aws_secret_access_key), or send `Authorization: Bearer <API key>` (the openai client's api_key)."
)


class AuthFailure(Exception):
    """A refusal. `message` is what the caller reads: what went wrong and how to fix it; never a secret."""

    code: ClassVar[str]
    json_code: ClassVar[str | None] = None  # the JSON protocols' `__type` where it differs from `code`
    json_status: ClassVar[int] = 403  # AWS JSON 1.1 (the control plane)
    rest_status: ClassVar[int] = 403  # rest-json (the runtime, pier's own routes)
    openai_status: ClassVar[int] = 401
    openai_code: ClassVar[str | None] = "invalid_api_key"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class MissingAuthenticationToken(AuthFailure):
    code = "MissingAuthenticationTokenException"
    openai_code = None  # OpenAI answers a missing key with code null

    def __init__(self) -> None:
        super().__init__(f"Missing Authentication Token: this pier gateway requires credentials. {HOW_TO_AUTHENTICATE}")


class IncompleteSignature(AuthFailure):
    code = "IncompleteSignatureException"
    json_status = 400
    rest_status = 400


class UnrecognizedClient(AuthFailure):
    code = "UnrecognizedClientException"

    def __init__(self, what: str = "security token") -> None:
        super().__init__(
            f"The {what} included in the request is invalid. It is not a key of this pier gateway, or it was "
            "revoked; `pier keys ls` lists the keys, `pier keys create` makes one."
        )


class InvalidSignature(AuthFailure):
    code = "InvalidSignatureException"


class ExpiredKey(AuthFailure):
    """A key past its expiry time: AWS's code for a credential that has expired."""

    code = "ExpiredTokenException"

    def __init__(self, name: str, expired_at: str) -> None:
        super().__init__(
            f"The security token included in the request is expired: pier key {name!r} expired at {expired_at}. "
            f"Use another key, or make one: `pier keys rotate {name}` (new secrets for it) or `pier keys create`.")


class NoUsableKey(AuthFailure):
    """Keys are required (the gateway listens beyond loopback, or has keys) but none is valid: fail closed."""

    code = "UnrecognizedClientException"

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"This pier gateway refuses every call: {reason}. An operator on its host can create one, which works "
            "at once (no restart): `pier keys create NAME --role admin` (with the gateway's --state-dir or "
            "PIER_STATE_DIR); then sign requests with it or send it as a Bearer API key.")


class AccessDenied(AuthFailure):
    code = "AccessDeniedException"
    json_status = 400
    openai_status = 403
    openai_code = "insufficient_permissions"


class RequestRefused(AuthFailure):
    """A Host or Origin pier does not serve (DNS rebinding, a web page): 403 in every family."""

    code = "AccessDeniedException"
    json_status = 403
    openai_status = 403
    openai_code = "forbidden_origin"


class BodyTooLarge(AuthFailure):
    """A signed body must be read whole to check its hash; past the runtime's limit it is not read at all."""

    code = "ValidationError"  # the runtime's (rest-json) name for a bad request
    json_code = "ValidationException"  # the control plane's, Application Auto Scaling's and CloudWatch's
    json_status = 413
    rest_status = 413
    openai_status = 413
    openai_code = "request_too_large"


class KeysUnreadable(AuthFailure):
    """The key file is damaged: every request is refused (fail closed) until it is fixed."""

    code = "InternalFailure"
    json_status = 500
    rest_status = 500
    openai_status = 500
    openai_code = "server_error"
