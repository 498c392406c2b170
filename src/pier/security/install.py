"""Putting the guard in front of the gateway app:

    keys = install_security(app, state_dir, SecuritySettings.from_env(bind_host=host), endpoint_of=...,
                            max_body_bytes=runtime_settings.max_payload_bytes,
                            control_body_bytes=control.limits.MAX_BODY_BYTES)
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from pier.security.access import EndpointOf
from pier.security.guard import SecurityGuard
from pier.security.keystore import KeyStore, private_folder
from pier.security.redaction import redact_access_log
from pier.security.settings import SecuritySettings


def install_security(app: FastAPI, state_dir: Path, settings: SecuritySettings, *, endpoint_of: EndpointOf,
                     max_body_bytes: int, control_body_bytes: int, keys: KeyStore | None = None) -> KeyStore:
    """Guard every route of `app`; the state folder (keys, model environments in SQLite, copy logs) becomes
    private to this user. Returns the key store the guard reads. `max_body_bytes`: the most a signed body may
    hold (it is read whole to check its hash); `control_body_bytes`: the control plane's limit, under which
    its bodies are read for the audit line. `keys`: where the keys are kept (default the folder's keys.json)."""
    private_folder(state_dir)
    keys = keys or KeyStore.in_state_dir(state_dir, settings.session_keys)
    app.add_middleware(SecurityGuard, keys=keys, hosts=settings.host_policy(), endpoint_of=endpoint_of,
                       max_body_bytes=max_body_bytes, control_body_bytes=control_body_bytes, clock=settings.clock,
                       bind_host=settings.bind_host, insecure=settings.insecure)
    redact_access_log()
    return keys
