"""Why a request is refused before it reaches the gateway's routes, with AWS's codes and statuses.

botocore reads a JSON 1.1 error's code from `__type` in the body and a rest-json error's from the
`x-amzn-ErrorType` header; statuses follow AWS: authentication failures are 403 (IncompleteSignature 400),
AccessDenied is 400 on JSON 1.1 services and 403 on rest services. OpenAI clients get 401 for a missing or
wrong credential and 403 for one that may not do what it asked.
"""

from __future__ import annotations

from pier.errors import PierError, Wire

SIGNATURE_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access "
    "Key and signing method. Consult the service documentation for details."
)
HOW_TO_AUTHENTICATE = (
    "Sign requests with an access key from `pier keys create NAME --role ROLE` (boto3: aws_access_key_id and "
    "aws_secret_access_key), or send `Authorization: Bearer <API key>` (the openai client's api_key)."
)


def _wire(code: str, *, status: int = 403, control_status: int | None = None, control_code: str | None = None,
          openai_status: int = 401) -> Wire:
    """A refusal's wire fields: `status` on rest-json (the runtime, pier's own routes), `control_status` and
    `control_code` where AWS JSON (the control plane) differs, `openai_status` on the OpenAI routes."""
    client = openai_status < 500
    return Wire(openai_status, "invalid_request_error" if client else "server_error", openai_status,
                _TGI_TYPES.get(openai_status, "validation" if client else "internal"), status, code,
                control_status=control_status, control_code=control_code)


_TGI_TYPES = {401: "unauthorized", 403: "forbidden", 413: "payload_too_large"}


class AuthFailure(PierError):
    """A refusal. `message` is what the caller reads: what went wrong and how to fix it; never a secret. Its AWS
    code is `wire.sagemaker_code`; `code` is OpenAI's."""

    code: str | None = "invalid_api_key"
    wire = _wire("AccessDeniedException")


class MissingAuthenticationToken(AuthFailure):
    code = None  # OpenAI answers a missing key with code null
    wire = _wire("MissingAuthenticationTokenException")

    def __init__(self) -> None:
        super().__init__(f"Missing Authentication Token: this pier gateway requires credentials. {HOW_TO_AUTHENTICATE}")


class IncompleteSignature(AuthFailure):
    wire = _wire("IncompleteSignatureException", status=400, control_status=400)


class UnrecognizedClient(AuthFailure):
    wire = _wire("UnrecognizedClientException")

    def __init__(self, what: str = "security token") -> None:
        super().__init__(
            f"The {what} included in the request is invalid. It is not a key of this pier gateway, or it was "
            "revoked; `pier keys ls` lists the keys, `pier keys create` makes one."
        )


class InvalidSignature(AuthFailure):
    wire = _wire("InvalidSignatureException")


class ExpiredKey(AuthFailure):
    """A key past its expiry time: AWS's code for a credential that has expired."""

    wire = _wire("ExpiredTokenException")

    def __init__(self, name: str, expired_at: str) -> None:
        super().__init__(
            f"The security token included in the request is expired: pier key {name!r} expired at {expired_at}. "
            f"Use another key, or make one: `pier keys rotate {name}` (new secrets for it) or `pier keys create`.")


class NoUsableKey(AuthFailure):
    """Keys are required (the gateway listens beyond loopback, or has keys) but none is valid: fail closed."""

    wire = _wire("UnrecognizedClientException")

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"This pier gateway refuses every call: {reason}. An operator on its host can create one, which works "
            "at once (no restart): `pier keys create NAME --role admin` (with the gateway's --state-dir or "
            "PIER_STATE_DIR); then sign requests with it or send it as a Bearer API key.")


class AccessDenied(AuthFailure):
    code = "insufficient_permissions"
    wire = _wire("AccessDeniedException", control_status=400, openai_status=403)


class RequestRefused(AuthFailure):
    """A Host or Origin pier does not serve (DNS rebinding, a web page): 403 in every dialect."""

    code = "forbidden_origin"
    wire = _wire("AccessDeniedException", openai_status=403)


class BodyTooLarge(AuthFailure):
    """A signed body must be read whole to check its hash; past the runtime's limit it is not read at all.
    The runtime's (rest-json) name for a bad request is ValidationError; the control plane's, Application Auto
    Scaling's and CloudWatch's ValidationException."""

    code = "request_too_large"
    wire = _wire("ValidationError", status=413, control_status=413, control_code="ValidationException",
                 openai_status=413)


class KeysUnreadable(AuthFailure):
    """The key file is damaged: every request is refused (fail closed) until it is fixed. A refusal like
    NoUsableKey's (the caller holds no key this gateway can check); which file and why go to the gateway's log
    only, as a caller beyond loopback has no business with the host's paths."""

    wire = _wire("UnrecognizedClientException")

    def __init__(self) -> None:
        super().__init__(
            "This pier gateway refuses every call: it has no usable keys, as its key file cannot be read. An "
            "operator on its host finds why and the fix in the gateway's log (or with `pier state check`); the "
            "keys work again, with no restart, once the file is restored.")
