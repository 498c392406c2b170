"""`pier keys create / ls / revoke` on a state folder, as a user runs them."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from pier.cli import app
from pier.security.keystore import KeyStore


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_create_shows_the_secrets_once_and_ls_never(tmp_path: Path) -> None:
    code, out, _ = run("keys", "create", "ci", "--role", "invoke", "--endpoint", "chat", "--state-dir", str(tmp_path),
                       "--json")
    assert code == 0
    created = json.loads(out)
    assert created["role"] == "invoke" and created["endpoints"] == ["chat"]
    stored = KeyStore.in_state_dir(tmp_path).by_api_key(created["api_key"])
    assert stored is not None and stored.secret_access_key == created["secret_access_key"]
    code, out, err = run("keys", "ls", "--state-dir", str(tmp_path), "--json")
    assert code == 0 and json.loads(out)[0]["access_key_id"] == created["access_key_id"]
    code, table_out, table_err = run("keys", "ls", "--state-dir", str(tmp_path))
    for secret in (created["secret_access_key"], created["api_key"]):
        assert secret not in out + err + table_out + table_err


def test_create_prints_how_to_use_the_key(tmp_path: Path) -> None:
    code, out, err = run("keys", "create", "root", "--role", "admin", "--state-dir", str(tmp_path))
    assert code == 0
    assert "AWS secret access key:" in out and "API key (Bearer):" in out and "shown once" in err


def test_refusals(tmp_path: Path) -> None:
    assert run("keys", "create", "x", "--role", "root", "--state-dir", str(tmp_path))[0] == 2
    assert run("keys", "create", "x", "--role", "admin", "--endpoint", "e", "--state-dir", str(tmp_path))[0] == 2
    assert run("keys", "create", "x", "--state-dir", str(tmp_path))[0] == 0
    code, _, err = run("keys", "create", "x", "--state-dir", str(tmp_path))
    assert code == 1 and "exists already" in err
    code, _, err = run("keys", "revoke", "nobody", "--state-dir", str(tmp_path))
    assert code == 1 and "No key is called nobody" in err
    assert run("keys", "revoke", "x", "--state-dir", str(tmp_path))[0] == 0
    assert KeyStore.in_state_dir(tmp_path).saved() == ()


def test_rotate_then_revoke_the_old_secrets(tmp_path: Path) -> None:
    folder = str(tmp_path)
    old = json.loads(run("keys", "create", "ci", "--role", "invoke", "--state-dir", folder, "--json")[1])
    code, out, err = run("keys", "rotate", "ci", "--state-dir", folder)
    assert code == 0 and "API key (Bearer):" in out and "pier keys revoke ci --access-key-id OLD_ID" in err
    listed = json.loads(run("keys", "ls", "--state-dir", folder, "--json")[1])
    assert [row["name"] for row in listed] == ["ci", "ci"]
    new_id = listed[1]["access_key_id"]
    assert run("keys", "revoke", "ci", "--access-key-id", old["access_key_id"], "--state-dir", folder)[0] == 0
    assert [k.access_key_id for k in KeyStore.in_state_dir(tmp_path).saved()] == [new_id]


def test_expires(tmp_path: Path) -> None:
    folder = str(tmp_path)
    created = json.loads(run("keys", "create", "temp", "--expires", "2h", "--state-dir", folder, "--json")[1])
    assert abs(created["expires"] - (time.time() + 7200)) < 60
    code, out, err = run("keys", "ls", "--state-dir", folder)
    assert code == 0 and "temp" in out and "expires" in out and err == ""  # the table on stdout, as its --json
    code, _, err = run("keys", "create", "past", "--expires", "2001-01-01", "--state-dir", folder)
    assert code == 2 and "not in the future" in err
    code, _, err = run("keys", "rotate", "temp", "--expires", "whenever", "--state-dir", folder)
    assert code == 2 and "neither a duration" in err


def test_revoking_the_last_key_warns(tmp_path: Path) -> None:
    folder = str(tmp_path)
    run("keys", "create", "a", "--role", "admin", "--state-dir", folder)
    run("keys", "create", "b", "--role", "admin", "--state-dir", folder)
    code, _, err = run("keys", "revoke", "a", "--state-dir", folder)
    assert code == 0 and "warning" not in err
    code, _, err = run("keys", "revoke", "b", "--state-dir", folder)
    assert code == 0 and "warning:" in err and "No key is left" in " ".join(err.split())
