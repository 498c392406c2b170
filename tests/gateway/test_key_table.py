"""API keys in the state database (`--state-url`): a key made with `pier keys create --state-url …` works on every
gateway on that database (boto3 signing with it, the openai client's Bearer), one revoked there stops working on
all of them, and `pier state migrate` moves a folder's keys.json along with the stores."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import boto3
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from pier.cli import app
from pier.gateway import key_table
from pier.gateway.app import create_gateway
from pier.gateway.key_table import DatabaseKeys, KeyTable
from pier.gateway.settings import GatewaySettings
from pier.security.keystore import KeyStoreError
from pier.security.principal import Role
from pier.state_folder.postgres import Postgres
from pier.state_folder.store import Driver
from tests.control.fakes import FakeBackend
from tests.postgres import PostgresServer
from tests.sockets import serving
from tests.waiting import until


@contextmanager
def gateways(tmp_path: Path, url: str, count: int) -> Iterator[list[str]]:
    with ExitStack() as stack:
        yield [stack.enter_context(serving(create_gateway(
            tmp_path / f"state-{i}", backend=FakeBackend(), tick_s=0.05, settings=GatewaySettings(state_url=url)),
            lifespan="on")) for i in range(count)]


def keys(*args: str) -> Any:
    result = CliRunner().invoke(app, ["keys", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if "--json" in args else result.output


def signed(url: str, key: dict[str, Any]) -> Any:
    return boto3.client("sagemaker", endpoint_url=url, region_name="eu-west-1",
                        aws_access_key_id=key["access_key_id"], aws_secret_access_key=key["secret_access_key"],
                        config=Config(retries={"max_attempts": 1}))


def refused(call: Any) -> bool:
    try:
        call()
    except ClientError:
        return True
    return False


def test_a_key_made_against_the_database_works_on_every_gateway(tmp_path: Path,
                                                                 postgres_server: PostgresServer) -> None:
    url = postgres_server.database()
    with gateways(tmp_path, url, 2) as (one, two):
        key = keys("create", "ops", "--role", "admin", "--state-url", url, "--json")
        for gateway in (one, two):
            until(lambda g=gateway: not refused(signed(g, key).list_models), timeout=5, what="the key accepted")
            models = openai.OpenAI(base_url=f"{gateway}/v1", api_key=key["api_key"], max_retries=0).models.list()
            assert models.data == []
            assert refused(signed(gateway, {**key, "secret_access_key": "x" * 40}).list_models)
        keys("create", "reader", "--state-url", url)  # one left after the revoke: authentication stays on
        assert [row["name"] for row in keys("ls", "--state-url", url, "--json")] == ["ops", "reader"]
        assert not (tmp_path / "state-0" / "keys.json").exists()  # nothing in the folders
        keys("revoke", "ops", "--state-url", url)
        for gateway in (one, two):
            until(lambda g=gateway: refused(signed(g, key).list_models), timeout=5, what="the revoked key refused")


def test_migrate_moves_keys_json_into_the_database(tmp_path: Path, postgres_server: PostgresServer) -> None:
    folder = tmp_path / "state"
    key = keys("create", "ops", "--role", "admin", "--state-dir", str(folder), "--json")
    keys("create", "reader", "--state-dir", str(folder))
    url = postgres_server.database()
    result = CliRunner().invoke(app, ["state", "migrate", "--to", url, "--state-dir", str(folder)])
    assert result.exit_code == 0, result.output
    assert "pier_keys.keys: 2 rows ok" in " ".join(result.output.split())
    assert [row["name"] for row in keys("ls", "--state-url", url, "--json")] == ["ops", "reader"]
    with gateways(tmp_path, url, 1) as (gateway,):
        assert signed(gateway, key).list_models()["Models"] == []


def test_a_damaged_keys_json_stops_the_migration(tmp_path: Path, postgres_server: PostgresServer) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    (folder / "keys.json").write_text("{not json")
    url = postgres_server.database()
    result = CliRunner().invoke(app, ["state", "migrate", "--to", url, "--state-dir", str(folder)])
    assert result.exit_code == 1
    assert "is not a pier key file" in " ".join(result.output.split())
    assert CliRunner().invoke(app, ["state", "migrate", "--to", url, "--state-dir", str(tmp_path / "empty")]
                              ).exit_code == 0  # nothing was left behind: the database is still without pier's state


def test_the_key_rules_hold_in_a_table(tmp_path: Path, driver: Driver | None) -> None:
    table = KeyTable.open(tmp_path, driver)
    try:
        store = DatabaseKeys(table)
        first = store.create("ops", Role.ADMIN)
        with pytest.raises(KeyStoreError, match="exists already"):
            store.create("ops", Role.INVOKE)
        second = store.rotate("ops")
        assert store.by_api_key(first.api_key) is not None and store.by_api_key(second.api_key) is not None
        store.revoke("ops", first.stored.access_key_id)
        again = DatabaseKeys(table)  # another gateway's view
        assert again.by_api_key(first.api_key) is None
        assert again.by_access_key(second.stored.access_key_id) == second.stored
        with pytest.raises(KeyStoreError, match="No key is called nobody"):
            store.revoke("nobody")
    finally:
        table.close()


def test_while_the_database_is_away_the_keys_read_last_serve(tmp_path: Path, postgres_server: PostgresServer,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(key_table, "REREAD_S", 0.0)
    table = KeyTable.open(tmp_path, Postgres(postgres_server.database()))
    try:
        issued = DatabaseKeys(table).create("ops", Role.ADMIN)
        keys, unread = DatabaseKeys(table), DatabaseKeys(table)
        assert keys.by_api_key(issued.api_key) is not None
        postgres_server.halt()
        try:
            assert keys.by_api_key(issued.api_key) is not None  # runtime calls go on
            with pytest.raises(KeyStoreError, match="state database"):  # none read yet: refused (fails closed)
                unread.by_api_key(issued.api_key)
        finally:
            postgres_server.start()
        assert keys.by_api_key(issued.api_key) is not None and unread.by_api_key(issued.api_key) is not None
    finally:
        table.close()
