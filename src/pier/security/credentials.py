"""New credentials and how API keys are kept: every secret comes from `secrets` (the OS's CSPRNG).

An access key pair is what SigV4 clients (boto3, the sagemaker SDK) sign with; its secret must stay readable
on the server, which recomputes the HMAC. An API key is a bearer token for OpenAI-style clients; the server
keeps only its SHA-256 (a 256-bit random token needs no slow hash: there is nothing to guess from it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

ACCESS_KEY_PREFIX = "PIER"  # 20 characters like AWS's AKIA..., but never mistaken for an AWS key
API_KEY_PREFIX = "pier-"


def new_access_key_id() -> str:
    return ACCESS_KEY_PREFIX + base64.b32encode(secrets.token_bytes(10)).decode()[:16]


def new_secret_access_key() -> str:
    return secrets.token_urlsafe(30)  # 40 characters, 240 random bits


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def api_key_digest(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8", "surrogatepass")).hexdigest()


def same_secret(given: str, expected: str) -> bool:
    """Constant-time: how long it takes says nothing about how much of `given` was right."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))
