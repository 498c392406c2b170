"""A per-copy secret: a copy answers only the gateway that started it.

The backend makes a secret for each copy, gives it to the copy's process in PIER_COPY_SECRET (its environment,
never its command line, which any local user can read) and reports it in the copy's status; the gateway sends
it in X-Pier-Copy-Secret with every request it forwards. Copies of the local backend listen on loopback, where
the secret also keeps out other local users and pages that find the port; copies on other hosts (Ray) need it.
"""

from __future__ import annotations

import secrets

from pier.channel.headers import COPY_SECRET_HEADER

COPY_SECRET_ENV = "PIER_COPY_SECRET"


def new_copy_secret() -> str:
    return secrets.token_urlsafe(32)


def copy_secret_header(secret: str | None) -> dict[str, str]:
    """The header a request to the copy carries: none for a copy without a secret."""
    return {COPY_SECRET_HEADER: secret} if secret else {}
