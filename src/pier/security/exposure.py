"""Whether the gateway may listen where it was asked: beyond loopback, only with keys (or --insecure)."""

from __future__ import annotations

import logging
from pathlib import Path

from pier.security.hosts import is_loopback
from pier.security.keystore import KeyStore, KeyStoreError

log = logging.getLogger("pier.gateway")


def exposure_problem(host: str, has_keys: bool, insecure: bool) -> str | None:
    """Why the gateway must not start, or None."""
    if is_loopback(host) or has_keys or insecure:
        return None
    return (
        f"pier will not listen on {host} without keys: anyone who can reach that address could create a model "
        "whose code/inference.py runs as your user. Create a key first (`pier keys create admin --role admin`, "
        "then sign requests with it), listen on 127.0.0.1 only, or pass --insecure to serve this network without "
        "authentication."
    )


def exposure_warning(host: str, has_keys: bool, insecure: bool) -> str | None:
    """What to say when --insecure let it start anyway."""
    if is_loopback(host) or has_keys or not insecure:
        return None
    return (f"--insecure: serving {host} WITHOUT authentication; anyone who can reach it can run code as this user. "
            "Create a key with `pier keys create` to turn authentication on (no restart needed).")


def may_listen(state_dir: Path, host: str, insecure: bool) -> bool:
    """Log why not (an error) or the --insecure warning; for the gateway's entry point to call before it binds."""
    try:
        has_keys = KeyStore.in_state_dir(state_dir).has_keys()
    except KeyStoreError as error:
        log.error("%s", error)
        return False
    problem = exposure_problem(host, has_keys, insecure)
    if problem is not None:
        log.error("%s", problem)
        return False
    warning = exposure_warning(host, has_keys, insecure)
    if warning is not None:
        log.warning("%s", warning)
    return True
