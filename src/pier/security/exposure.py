"""Whether the gateway may listen where it was asked (beyond loopback, only with keys, or --insecure), and
whether a request needs a key: decided at every request from where it listens and the keys it has now, so
revoking the last key, or deleting or emptying keys.json, never opens a gateway that listens beyond loopback."""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

from pier.security.hosts import is_loopback
from pier.security.keystore import KeyStore, KeyStoreError

log = logging.getLogger("pier.gateway")


class Door(StrEnum):
    OPEN = "open"  # no key needed: loopback (or --insecure) and no key at all
    KEYED = "keyed"  # a valid key needed
    SHUT = "shut"  # keys are needed but none is valid: every call refused, with how to create one


def door(host: str, insecure: bool, keys: int, valid_keys: int) -> Door:
    """How a request is let in, for a gateway listening on `host` with `keys` keys of which `valid_keys` have not
    expired. Only the laptop default (loopback, no key ever made or all revoked) and an explicit --insecure open
    it; keys that all expired close it wherever it listens, as an expiry must never open anything."""
    if valid_keys:
        return Door.KEYED
    if keys == 0 and (is_loopback(host) or insecure):
        return Door.OPEN
    return Door.SHUT


def why_shut(host: str, keys: int) -> str:
    """The reason a NoUsableKey refusal gives (for a SHUT door)."""
    if keys:
        return f"every one of its {keys} key(s) has expired (`pier keys ls` shows when)"
    return (f"it listens on {host}, beyond loopback, so every call needs a key, and it has none (the last one was "
            "revoked, or keys.json was deleted or emptied)")


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


def may_listen(state_dir: Path, host: str, insecure: bool, keys: KeyStore | None = None) -> bool:
    """Log why not (an error) or the --insecure warning; for the gateway's entry point to call before it binds.
    `keys`: where the gateway's keys are (default the folder's keys.json)."""
    try:
        has_keys = (keys or KeyStore.in_state_dir(state_dir)).has_keys()
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
