"""The gateway's keys: `<state_dir>/keys.json`, mode 0600 in a 0700 folder, written atomically.

`pier keys` edits the file directly (the gateway need not run), and a running gateway re-reads it when it
changes, so a new or revoked key takes effect on the next request. The file holds each access key's secret
(SigV4 verification needs it) and only a hash of each API key.

A principal (a name) has one set of credentials, or two while it is being rotated (as an IAM user has up to two
access keys): `rotate` adds the second, and the first works until it is revoked by its access key id. A set may
carry an expiry time, after which it is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pier.security.credentials import (
    api_key_digest,
    new_access_key_id,
    new_api_key,
    new_secret_access_key,
    same_secret,
)
from pier.security.principal import Principal, Role

FILE_NAME = "keys.json"
FORMAT_VERSION = 1
MAX_CREDENTIALS = 2  # per principal, as IAM allows two access keys per user: the one in use and its replacement
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@")


class KeyStoreError(ValueError):
    """A key cannot be made, found or read; the message says what to do."""


@dataclass(frozen=True)
class StoredKey:
    principal: Principal
    access_key_id: str
    secret_access_key: str = field(repr=False)
    api_key_sha256: str = field(repr=False)
    created: float = 0.0
    expires: float | None = None  # epoch seconds; None: never

    def expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires


@dataclass(frozen=True)
class IssuedKey:
    """A key as it is created: the only time its secrets are shown."""

    stored: StoredKey
    api_key: str = field(repr=False)

    @property
    def secret_access_key(self) -> str:
        return self.stored.secret_access_key


def issue(name: str, role: Role, endpoints: Iterable[str] = (), expires: float | None = None) -> IssuedKey:
    """Fresh credentials for a principal (not yet stored anywhere)."""
    _check_name(name)
    return _issue_for(Principal(name, role, tuple(dict.fromkeys(endpoints))), expires)


def _issue_for(principal: Principal, expires: float | None) -> IssuedKey:
    api_key = new_api_key()
    stored = StoredKey(principal, new_access_key_id(), new_secret_access_key(), api_key_digest(api_key), time.time(),
                       expires)
    return IssuedKey(stored, api_key)


class KeyStore:
    """The keys in the file, plus session keys: in memory only, for a process's own calls to the gateway it runs
    (`pier serve` deploying its model). Session keys never turn authentication on by themselves."""

    def __init__(self, path: Path, session_keys: Iterable[StoredKey] = ()) -> None:
        self.path = path
        self.session_keys = tuple(session_keys)
        self._seen: tuple[int, int, int] | None = None
        self._keys: tuple[StoredKey, ...] = ()

    @classmethod
    def in_state_dir(cls, state_dir: Path, session_keys: Iterable[StoredKey] = ()) -> KeyStore:
        return cls(Path(state_dir).expanduser() / FILE_NAME, session_keys)

    # ---- reading (the gateway, on every request)

    def saved(self) -> tuple[StoredKey, ...]:
        """The keys in the file (not the session keys)."""
        self._refresh()
        return self._keys

    def has_keys(self) -> bool:
        return bool(self.saved())

    def usable(self, now: float) -> tuple[StoredKey, ...]:
        """The keys in the file that have not expired."""
        return tuple(k for k in self.saved() if not k.expired(now))

    def by_access_key(self, access_key_id: str) -> StoredKey | None:
        return next((k for k in self._all() if k.access_key_id == access_key_id), None)

    def by_api_key(self, api_key: str) -> StoredKey | None:
        digest = api_key_digest(api_key)
        return next((k for k in self._all() if same_secret(digest, k.api_key_sha256)), None)

    def _all(self) -> tuple[StoredKey, ...]:
        return self.session_keys + self.saved()

    # ---- writing (`pier keys`)

    def create(self, name: str, role: Role, endpoints: Iterable[str] = (), expires: float | None = None
               ) -> IssuedKey:
        issued = issue(name, role, endpoints, expires)
        with self._locked():
            keys = self._read()
            if any(k.principal.name == name for k in keys):
                raise KeyStoreError(f"A key called {name} exists already; revoke it first (`pier keys revoke {name}`), "
                                    f"give it new secrets (`pier keys rotate {name}`) or choose another name.")
            self._write([*keys, issued.stored])
        return issued

    def rotate(self, name: str, expires: float | None = None) -> IssuedKey:
        """New secrets for `name`, with its role and endpoints; its current ones keep working until revoked."""
        with self._locked():
            keys = self._read()
            current = _named(keys, name)
            if len(current) >= MAX_CREDENTIALS:
                ids = ", ".join(k.access_key_id for k in current)
                raise KeyStoreError(
                    f"{name} has {len(current)} sets of secrets already (access key ids {ids}); revoke the old one "
                    f"first: `pier keys revoke {name} --access-key-id {current[0].access_key_id}`.")
            issued = _issue_for(current[-1].principal, expires)
            self._write([*keys, issued.stored])
        return issued

    def revoke(self, name: str, access_key_id: str | None = None) -> tuple[StoredKey, ...]:
        """Every set of secrets of `name`, or only the one with `access_key_id` (the old one, after a rotation)."""
        with self._locked():
            keys = self._read()
            found = _named(keys, name)
            if access_key_id is not None:
                found = [k for k in found if k.access_key_id == access_key_id]
                if not found:
                    ids = ", ".join(k.access_key_id for k in _named(keys, name))
                    raise KeyStoreError(f"{name} has no access key id {access_key_id} (its ids: {ids}).")
            self._write([k for k in keys if k not in found])
        return tuple(found)

    # ---- the file

    def _refresh(self) -> None:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            seen = None
        else:
            seen = (info.st_ino, info.st_mtime_ns, info.st_size)
        if seen == self._seen:
            return
        self._keys = tuple(self._read()) if seen is not None else ()
        self._seen = seen

    def _read(self) -> list[StoredKey]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except IsADirectoryError:
            raise KeyStoreError(damaged(self.path, "it is a folder, not a file")) from None
        except OSError as error:
            raise KeyStoreError(damaged(self.path, f"it cannot be read ({error.strerror or error})")) from None
        try:
            keys, bad = read_document(raw)
        except ValueError as error:
            raise KeyStoreError(damaged(self.path, str(error))) from None
        if bad:
            raise KeyStoreError(damaged(self.path, "; ".join(f"key {name}: {why}" for name, why in bad)))
        return keys

    def _write(self, keys: list[StoredKey]) -> None:
        private_folder(self.path.parent)
        document = {"version": FORMAT_VERSION, "keys": [entry(k) for k in keys]}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            os.fchmod(out.fileno(), 0o600)  # O_CREAT's mode does not apply to a file left by a crashed writer
            json.dump(document, out, indent=2)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """One writer at a time (two `pier keys create` at once must not lose a key)."""
        private_folder(self.path.parent)
        descriptor = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)


def read_document(raw: bytes) -> tuple[list[StoredKey], list[tuple[str, str]]]:
    """The keys in a key file's bytes, and each entry that does not read as one (its name, or its place, and why).
    ValueError when the bytes are no key file at all (`pier state check` reads the file this way too)."""
    try:
        document = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(f"it is not UTF-8 text (byte {error.start} is {raw[error.start:error.start + 1]!r})") from None
    except (ValueError, RecursionError) as error:
        raise ValueError(f"it is not JSON ({error})" if raw.strip() else "it is empty") from None
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ValueError('it is JSON but has no "keys" list')
    return read_entries(entries)


def read_entries(entries: list[Any]) -> tuple[list[StoredKey], list[tuple[str, str]]]:
    """The keys among a key file's entries (or a database's rows of them, `pier.gateway.key_table`), and each one
    that does not read as a key (its name, or its place, and why)."""
    keys: list[StoredKey] = []
    bad: list[tuple[str, str]] = []
    for place, entry in enumerate(entries):
        try:
            keys.append(_from_json(entry))
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            name = entry.get("name") if isinstance(entry, dict) else None
            bad.append((name if isinstance(name, str) else f"#{place + 1}", f"{type(error).__name__}: {error}"))
    return keys, bad


def damaged(path: Path, problem: str) -> str:
    """A damaged key file's message: what is wrong and the ways out."""
    return (f"{path} is not a pier key file: {problem}. Restore it from a backup (pier state restore "
            f"--state-dir {path.parent}), or move it aside (mv {path} {path}.damaged) and create the keys again "
            "(pier keys create).")


def private_folder(folder: Path) -> None:
    """Create the folder, or take away what others may do in it: 0700."""
    folder.mkdir(parents=True, exist_ok=True)
    if stat.S_IMODE(folder.stat().st_mode) & 0o077:
        folder.chmod(0o700)


def _named(keys: list[StoredKey], name: str) -> list[StoredKey]:
    found = [k for k in keys if k.principal.name == name]
    if not found:
        names = ", ".join(dict.fromkeys(k.principal.name for k in keys)) or "none"
        raise KeyStoreError(f"No key is called {name} (keys: {names}).")
    return found


def _check_name(name: str) -> None:
    if not name or len(name) > 64 or not set(name) <= NAME_CHARS:
        raise KeyStoreError(f"Key name {name!r} is not valid: use 1 to 64 letters, digits and - _ . @.")


def entry(key: StoredKey) -> dict[str, Any]:
    """A key as its file (or a database row) keeps it."""
    return {
        "name": key.principal.name, "role": key.principal.role.value, "endpoints": list(key.principal.endpoints),
        "access_key_id": key.access_key_id, "secret_access_key": key.secret_access_key,
        "api_key_sha256": key.api_key_sha256, "created": key.created, "expires": key.expires,
    }


def _from_json(entry: dict[str, Any]) -> StoredKey:
    principal = Principal(str(entry["name"]), Role(entry["role"]), tuple(str(e) for e in entry.get("endpoints", ())))
    expires = entry.get("expires")
    return StoredKey(principal, str(entry["access_key_id"]), str(entry["secret_access_key"]),
                     str(entry["api_key_sha256"]), float(entry.get("created", 0.0)),
                     float(expires) if expires is not None else None)
