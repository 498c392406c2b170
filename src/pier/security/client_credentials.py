"""Which credentials the `pier` CLI signs with: PIER_ACCESS_KEY_ID / PIER_SECRET_ACCESS_KEY when set; else, for
a gateway on this machine, an admin key from the local key file (the CLI runs as the user who owns it, who
could read it anyway); else placeholders, which a gateway without keys accepts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from pier.env import Env
from pier.security.hosts import is_loopback
from pier.security.keystore import KeyStore, KeyStoreError

ACCESS_KEY_ENV = "PIER_ACCESS_KEY_ID"
SECRET_KEY_ENV = "PIER_SECRET_ACCESS_KEY"
STATE_DIR_ENV = "PIER_STATE_DIR"
PLACEHOLDER = ("pier", "pier")


def cli_credentials(url: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    read = Env(env)
    key_id, secret = read.text(ACCESS_KEY_ENV), read.text(SECRET_KEY_ENV)
    if key_id and secret:
        return key_id, secret
    if is_loopback(urlsplit(url).hostname or ""):
        local = _local_admin_key(read.get(STATE_DIR_ENV, cast=Path) or Path.home() / ".pier")
        if local is not None:
            return local
    return PLACEHOLDER


def _local_admin_key(state_dir: Path) -> tuple[str, str] | None:
    try:
        keys = KeyStore.in_state_dir(state_dir).saved()
    except (KeyStoreError, OSError):
        return None
    admins = [k for k in keys if k.principal.is_admin]
    return (admins[0].access_key_id, admins[0].secret_access_key) if admins else None
