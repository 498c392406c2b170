"""The key file: private modes, atomic edits, API keys kept only as hashes, re-read when it changes."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from pier.security.credentials import api_key_digest
from pier.security.keystore import KeyStore, KeyStoreError, issue
from pier.security.principal import Role


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_created_key_has_both_kinds_of_credentials(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path / "state")
    issued = store.create("alice", Role.INVOKE, ["chat", "chat", "other"])
    stored = issued.stored
    assert stored.access_key_id.startswith("PIER") and len(stored.access_key_id) == 20
    assert len(stored.secret_access_key) == 40 and issued.api_key.startswith("pier-") and len(issued.api_key) > 40
    assert stored.principal.endpoints == ("chat", "other")
    assert store.by_access_key(stored.access_key_id) == stored
    assert store.by_api_key(issued.api_key) == stored
    assert store.by_api_key(issued.api_key + "x") is None
    assert store.by_access_key("PIERAAAAAAAAAAAAAAAA") is None


def test_the_file_is_private_and_holds_no_api_key(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    issued = KeyStore.in_state_dir(state).create("alice", Role.ADMIN)
    path = state / "keys.json"
    assert mode(path) == 0o600 and mode(state) == 0o700
    text = path.read_text()
    assert issued.api_key not in text and api_key_digest(issued.api_key) in text
    assert issued.secret_access_key in text  # SigV4 verification needs it: hence 0600
    assert [p.name for p in state.iterdir() if not p.name.startswith(".")] == ["keys.json"]  # no temporary left


def test_secrets_stay_out_of_reprs(tmp_path: Path) -> None:
    issued = issue("alice", Role.ADMIN)
    shown = repr(issued) + repr(issued.stored) + str(issued.stored)
    assert issued.api_key not in shown and issued.secret_access_key not in shown
    assert issued.stored.access_key_id in shown


def test_names_are_unique_and_plain(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path)
    store.create("alice", Role.ADMIN)
    with pytest.raises(KeyStoreError, match="exists already"):
        store.create("alice", Role.INVOKE)
    for bad in ("", "a b", "a/b", "x" * 65, "é"):
        with pytest.raises(KeyStoreError, match="not valid"):
            store.create(bad, Role.INVOKE)


def test_revoke(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path)
    alice = store.create("alice", Role.ADMIN)
    store.create("bob", Role.INVOKE)
    assert [k.principal.name for k in store.revoke("alice")] == ["alice"]
    assert [k.principal.name for k in store.saved()] == ["bob"]
    assert store.by_api_key(alice.api_key) is None
    with pytest.raises(KeyStoreError, match="No key is called alice"):
        store.revoke("alice")


def test_a_reader_sees_changes_made_by_another_store(tmp_path: Path) -> None:
    """The gateway's store and `pier keys`' are different objects (different processes)."""
    gateway, cli = KeyStore.in_state_dir(tmp_path), KeyStore.in_state_dir(tmp_path)
    assert not gateway.has_keys()
    created = cli.create("alice", Role.ADMIN)
    assert gateway.by_api_key(created.api_key) is not None
    cli.revoke("alice")
    assert gateway.by_api_key(created.api_key) is None and not gateway.has_keys()


def test_concurrent_creates_lose_no_key(tmp_path: Path) -> None:
    def create(index: int) -> None:
        KeyStore.in_state_dir(tmp_path).create(f"key-{index}", Role.INVOKE)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(KeyStore.in_state_dir(tmp_path).saved()) == 8


def test_session_keys_authenticate_but_do_not_turn_authentication_on(tmp_path: Path) -> None:
    session = issue("pier-serve", Role.ADMIN)
    store = KeyStore.in_state_dir(tmp_path, [session.stored])
    assert not store.has_keys()
    assert store.by_api_key(session.api_key) == session.stored
    assert not (tmp_path / "keys.json").exists()


def test_a_damaged_file_is_an_error_that_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "keys.json").write_text(json.dumps({"keys": [{"name": "x"}]}))
    with pytest.raises(KeyStoreError, match="not a pier key file"):
        KeyStore.in_state_dir(tmp_path).has_keys()


def test_a_world_readable_temporary_left_behind_is_not_reused_as_is(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path)
    leftover = tmp_path / f".keys.json.{os.getpid()}.tmp"
    leftover.write_text("junk")
    leftover.chmod(0o644)
    store.create("alice", Role.ADMIN)
    assert mode(tmp_path / "keys.json") == 0o600


def test_rotate_adds_a_second_secret_that_works_until_the_first_is_revoked(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path)
    first = store.create("ci", Role.INVOKE, ["chat"])
    second = store.rotate("ci")
    assert second.stored.principal == first.stored.principal  # same role and endpoints
    assert second.stored.access_key_id != first.stored.access_key_id and second.api_key != first.api_key
    for issued in (first, second):
        assert store.by_api_key(issued.api_key) == issued.stored
        assert store.by_access_key(issued.stored.access_key_id) == issued.stored
    with pytest.raises(KeyStoreError, match="revoke the old one first: `pier keys revoke ci --access-key-id"):
        store.rotate("ci")  # two at most, as IAM allows
    with pytest.raises(KeyStoreError, match="has no access key id PIERNOPE"):
        store.revoke("ci", "PIERNOPE")
    assert store.revoke("ci", first.stored.access_key_id) == (first.stored,)
    assert store.by_api_key(first.api_key) is None and store.by_api_key(second.api_key) == second.stored
    with pytest.raises(KeyStoreError, match="No key is called nobody"):
        store.rotate("nobody")
    store.rotate("ci")
    assert len(store.revoke("ci")) == 2 and store.saved() == ()  # revoking the name revokes all its secrets


def test_a_key_can_expire(tmp_path: Path) -> None:
    store = KeyStore.in_state_dir(tmp_path)
    lasting = store.create("lasting", Role.ADMIN)
    brief = store.create("brief", Role.INVOKE, expires=1000.0)
    assert lasting.stored.expires is None and brief.stored.expires == 1000.0
    assert not brief.stored.expired(999.9) and brief.stored.expired(1000.0)
    assert KeyStore.in_state_dir(tmp_path).by_api_key(brief.api_key) == brief.stored  # the expiry is kept
    assert store.usable(1000.0) == (lasting.stored,) and len(store.usable(999.0)) == 2
    assert store.rotate("brief", expires=5000.0).stored.expires == 5000.0


def test_a_key_file_without_expiry_times_still_reads(tmp_path: Path) -> None:
    """keys.json written before keys could expire."""
    issued = KeyStore.in_state_dir(tmp_path).create("old", Role.ADMIN)
    document = json.loads((tmp_path / "keys.json").read_text())
    del document["keys"][0]["expires"]
    (tmp_path / "keys.json").write_text(json.dumps(document))
    found = KeyStore.in_state_dir(tmp_path).by_api_key(issued.api_key)
    assert found is not None and found.expires is None
