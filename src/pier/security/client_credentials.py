"""Which credentials the `pier` CLI signs with: PIER_ACCESS_KEY_ID / PIER_SECRET_ACCESS_KEY when set; else, for
a gateway on this machine, an admin key from the local keys (the folder's key file, whose owner the CLI runs as and
who could read it anyway, or the state database's with PIER_STATE_URL, which whoever holds that URL can read); else
placeholders, which a gateway without keys accepts."""

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


def cli_credentials(url: str, env: Mapping[str, str] | None = None, keys: KeyStore | None = None
                    ) -> tuple[str, str]:
    """`keys`: where this machine's gateway keeps its keys (default: the state folder's key file)."""
    read = Env(env)
    key_id, secret = read.text(ACCESS_KEY_ENV), read.text(SECRET_KEY_ENV)
    if key_id and secret:
        return key_id, secret
    if is_loopback(urlsplit(url).hostname or ""):
        local = _local_admin_key(keys or KeyStore.in_state_dir(state_dir(env)))
        if local is not None:
            return local
    return PLACEHOLDER


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    return Env(env).get(STATE_DIR_ENV, cast=Path) or Path.home() / ".pier"


def _local_admin_key(store: KeyStore) -> tuple[str, str] | None:
    try:
        keys = store.saved()
    except (KeyStoreError, OSError):
        return None
    admins = [k for k in keys if k.principal.is_admin]
    return (admins[0].access_key_id, admins[0].secret_access_key) if admins else None
