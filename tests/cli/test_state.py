"""`pier state` finds the state folder where `pier up` and `pier keys` do, and `pier state check --state-url` checks
every store's schema in a PostgreSQL database as it checks the folder's files."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.gateway.copy_board import CopyBoard
from pier.gateway.key_table import KeyTable
from pier.gateway.state_files import STORES
from pier.gateway.stores import OpenStores
from pier.state_folder.postgres import Postgres
from tests.postgres import PostgresServer


def test_state_check_reads_pier_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gateway started with PIER_STATE_DIR set, refused for a damaged file: `pier state check` looked at
    ~/.pier instead and answered ok."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "state.sqlite3").write_bytes(b"not a database")
    monkeypatch.setenv("PIER_STATE_DIR", str(folder))
    result = CliRunner().invoke(app, ["state", "check"])
    assert result.exit_code == 1, result.output
    assert str(folder / "state.sqlite3") in result.output


# ---- pier state check --state-url: the stores in a PostgreSQL database


def _gateway_stores(tmp_path: Path, url: str) -> None:
    """Every store's schema made in the database, as a gateway's first start makes them, with a key and a model
    whose record does not read."""
    OpenStores(tmp_path / "state", (*STORES, KeyTable, CopyBoard), driver=Postgres(url)).close()
    assert CliRunner().invoke(app, ["keys", "create", "ops", "--role", "admin", "--state-url", url]).exit_code == 0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO pier_state.models (name, created, body) VALUES ('broken', 1.0, '{not json')")


def _check(url: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["state", "check", "--state-url", url])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(("damage", "exit_code", "says"), [
    ("", 1, ["pier_state (state schema", "unreadable model broken:", "pier_keys (state schema 1) keys: 1 record",
             "pier_state is sound; only the rows above do not read. Delete each"]),
    ("DELETE FROM pier_state.models WHERE name = 'broken'", 0, ["models: 0 records", "keys: 1 record", "ok"]),
    ("UPDATE pier_state.pier_version SET version = 99", 1, [
        "damaged: it was written by a newer pier (state schema 99; this pier reads up to",
        "pier_state is a newer pier's: run that pier (or a newer one)"]),
    ("DROP TABLE pier_state.endpoints", 1, [
        "damaged: its table endpoints is gone", "restore it from your dump (pg_restore), or drop it to start it "
        "again with no resources: DROP SCHEMA pier_state CASCADE"]),
    ("UPDATE pier_keys.keys SET entry = '{}'", 1, ["unreadable key ops:", "Revoke the key and create it again"]),
])
def test_state_check_reads_every_store_of_a_database(tmp_path: Path, postgres_server: PostgresServer, damage: str,
                                                     exit_code: int, says: list[str]) -> None:
    url = postgres_server.database()
    _gateway_stores(tmp_path, url)
    if damage:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(damage)
    code, output = _check(url)
    assert code == exit_code, output
    for words in says:
        assert words in output, output
    assert "backups:" not in output  # the database's own dumps keep its copies


def test_state_check_of_a_database_without_pier_reads_only(postgres_server: PostgresServer,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres_server.database()
    monkeypatch.setenv("PIER_STATE_URL", url)
    result = CliRunner().invoke(app, ["state", "check"])
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output
    assert "pier_state (none yet) damaged: there is no schema pier_state (a gateway makes it when it first starts)" \
        in output
    with psycopg.connect(url) as conn:  # nothing was made
        assert conn.execute("SELECT count(*) FROM information_schema.schemata WHERE schema_name LIKE 'pier%'"
                            ).fetchone() == (0,)


@pytest.mark.parametrize(("url", "exit_code", "says"), [
    ("postgresql://pier@/nowhere?host=/nonexistent&port=1", 1, "pier cannot reach its state database"),
    ("mysql://pier@db/pier", 2, "is not a PostgreSQL URL"),
])
def test_state_check_of_a_database_it_cannot_read(url: str, exit_code: int, says: str) -> None:
    code, output = _check(url)
    assert code == exit_code and says in output, output
