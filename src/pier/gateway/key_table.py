"""The gateways' keys in the state database (`--state-url`), in place of each folder's `keys.json`: a key made with
`pier keys create --state-url …` works on every gateway on that database, and one revoked there stops working on
all of them within `REREAD_S`.

`KeyTable` is the store (schema `pier_keys`: a row per set of secrets, each the entry `keys.json` keeps);
`DatabaseKeys` is the `KeyStore` the guard and `pier keys` use over it: the same rules (names, rotation, expiry), only
where the keys are kept differs. Writers take turns on the `writer` row (`SELECT … FOR UPDATE`), as `pier keys` on a
folder takes turns on its lock file, so two at once never lose a key.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pier.security import keystore
from pier.security.keystore import KeyStore, KeyStoreError, StoredKey
from pier.state_folder.database import Schema
from pier.state_folder.errors import StateUnavailable
from pier.state_folder.postgres import Postgres
from pier.state_folder.rows import BadRow, Rows
from pier.state_folder.store import StoreFile

log = logging.getLogger("pier.gateway")

REREAD_S = 1.0  # the guard reads the keys at most this often (once a request would be a query a request)


class KeyTable(StoreFile):
    """Kept only in a database: a folder keeps its keys in keys.json (`state_files.KEYS`)."""

    FILE = "keys.sqlite3"  # names the schema, pier_keys
    SCHEMA = Schema(1, (
        "CREATE TABLE IF NOT EXISTS keys (access_key_id TEXT PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL, "
        "entry TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS writer (id INTEGER PRIMARY KEY)",
        "INSERT INTO writer (id) VALUES (1) ON CONFLICT DO NOTHING",
    ), ("keys", "writer"), "no keys (create them again: pier keys create)",
        (Rows("keys", "SELECT access_key_id, name, created, entry FROM keys ORDER BY created, access_key_id",
              lambda row: read_key(row), lambda row: ("key", str(row[1])), counted="keys", zero=True),))
    MEND = "Revoke the key and create it again (pier keys revoke NAME; pier keys create NAME)"


def read_key(row: Sequence[Any]) -> StoredKey | BadRow:
    """A row of the table (access_key_id, name, created, entry) as the guard reads it (for `pier state check`)."""
    _, name, created, text = row
    try:
        entry = json.loads(text)
    except ValueError as error:
        return BadRow("key", str(name), float(created), f"its entry is not JSON ({error})")
    keys, bad = keystore.read_entries([entry])
    return keys[0] if keys else BadRow("key", str(name), float(created), bad[0][1] if bad else "it does not read")


def rows(keys: Iterable[StoredKey]) -> list[tuple[str, str, float, str]]:
    """The table's rows for `keys`: (access_key_id, name, created, entry as JSON)."""
    return [(k.access_key_id, k.principal.name, k.created, json.dumps(keystore.entry(k))) for k in keys]


def folder_rows(folder: Path) -> Mapping[str, Sequence[Sequence[Any]]]:
    """The rows of a folder's keys.json, for `pier state migrate` (none without the file; KeyStoreError when it
    does not read whole, with the fix)."""
    keys = KeyStore.in_state_dir(folder).saved()
    return {"keys": rows(keys)}


class DatabaseKeys(KeyStore):
    """The keys in `table`, plus this process's session keys (never stored)."""

    def __init__(self, table: KeyTable, session_keys: Iterable[StoredKey] = ()) -> None:
        super().__init__(table.path, session_keys)
        self.table = table
        self._read_at = -math.inf
        self._writing = False
        self._have_read = False
        self._away = False  # the database could not be reached at the last read: the keys read before serve

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at < REREAD_S:
            return
        try:
            self._keys = tuple(self._read())
        except StateUnavailable as error:
            if not self._have_read:  # no keys known to go on with: refuse (the guard fails closed)
                raise KeyStoreError(error.message) from None
            if not self._away:
                log.warning("%s The gateway goes on with the keys it read last until the database is back.",
                            error.message)
            self._away = True
        else:
            if self._away:
                log.warning("the state database's keys read again")
            self._have_read, self._away = True, False
        self._read_at = now

    def _read(self) -> list[StoredKey]:
        with self.table.lock:
            found = self.table.db.execute("SELECT access_key_id, entry FROM keys ORDER BY created, access_key_id"
                                          ).fetchall()
        entries: list[Any] = []
        for access_key_id, text in found:
            try:
                entries.append(json.loads(text))
            except ValueError:
                entries.append({"name": f"with access key id {access_key_id}"})  # read_entries says what is wrong
        keys, bad = keystore.read_entries(entries)
        if bad:
            raise KeyStoreError("The state database's keys (schema pier_keys) do not all read: "
                                + "; ".join(f"key {name}: {why}" for name, why in bad)
                                + f". {KeyTable.MEND}, or restore the database from its dump.")
        return keys

    def _write(self, keys: list[StoredKey]) -> None:
        assert self._writing, "keys are written inside _locked()"
        self.table.db.execute("DELETE FROM keys")
        if keys:
            self.table.db.executemany("INSERT INTO keys (access_key_id, name, created, entry) VALUES (?, ?, ?, ?)",
                                      rows(keys))
        self._read_at = -math.inf

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self.table.transaction() as db:
            db.execute("SELECT id FROM writer WHERE id = 1" + self.table.driver.for_update).fetchall()
            self._writing = True
            try:
                yield
            finally:
                self._writing = False


@contextmanager
def keys_in(url: str | None, folder: Path) -> Iterator[KeyStore]:
    """The keys a gateway on `folder` and the database at `url` (None: the folder's keys.json) uses, while open."""
    if url is None:
        yield KeyStore.in_state_dir(folder)
        return
    table = KeyTable.open(folder, Postgres(url))
    try:
        yield DatabaseKeys(table)
    finally:
        table.close()
