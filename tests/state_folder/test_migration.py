"""`pier state migrate --to postgresql://…`: a state folder's stores moved into a real PostgreSQL (tests/postgres.py),
counted after; a database that holds pier's state already is refused, saying how to proceed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from pier.cli import app
from pier.control.backups import holding
from pier.gateway.app import create_gateway
from pier.gateway.settings import GatewaySettings
from pier.state_folder.errors import StateError
from pier.state_folder.migration import Moved, text_value
from tests.control.fakes import FakeBackend
from tests.gateway.served import sagemaker_client
from tests.postgres import PostgresServer
from tests.sockets import serving


def _folder_with_state(tmp_path: Path) -> Path:
    """A state folder as a gateway leaves it: a model and an endpoint config made through boto3, and two scaling
    activities (numbered by SQLite's AUTOINCREMENT)."""
    folder = tmp_path / "state"
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.gguf").write_bytes(b"GGUF")
    with serving(create_gateway(folder, backend=FakeBackend(), tick_s=0.05), lifespan="on") as url:
        sagemaker = sagemaker_client(url)
        sagemaker.create_model(ModelName="Chat", PrimaryContainer={"ModelDataUrl": str(model)})
        sagemaker.create_endpoint_config(EndpointConfigName="chat-config", ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "Chat", "InstanceType": "local", "InitialInstanceCount": 1}])
    with sqlite3.connect(folder / "autoscaling.sqlite3") as db:
        db.executemany("INSERT INTO activities (id, resource, body) VALUES (?, ?, ?)",
                       [("a1", "endpoint/e", "{}"), ("a2", "endpoint/e", "{}")])
    return folder


def _migrate(folder: Path, url: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["state", "migrate", "--to", url, "--state-dir", str(folder)])
    return result.exit_code, " ".join(result.output.split())


def test_a_migrated_folder_is_read_by_a_gateway_on_the_database(tmp_path: Path,
                                                                postgres_server: PostgresServer) -> None:
    folder = _folder_with_state(tmp_path)
    url = postgres_server.database()
    code, output = _migrate(folder, url)
    assert code == 0, output
    assert "pier_state.models: 1 row ok" in output
    assert "pier_state.endpoint_configs: 1 row ok" in output
    assert "pier_autoscaling.activities: 2 rows ok" in output
    app_on_db = create_gateway(tmp_path / "other", backend=FakeBackend(), tick_s=0.05,
                               settings=GatewaySettings(state_url=url))
    with serving(app_on_db, lifespan="on") as gateway:
        sagemaker = sagemaker_client(gateway)
        assert sagemaker.describe_model(ModelName="chat")["ModelName"] == "Chat"  # names regardless of case still
        assert sagemaker.describe_endpoint_config(EndpointConfigName="chat-config")["ProductionVariants"][0][
            "ModelName"] == "Chat"
    with psycopg.connect(url) as conn:  # numbering goes on after the moved activities, as SQLite's would
        row = conn.execute("INSERT INTO pier_autoscaling.activities (id, resource, body) VALUES ('a3', 'r', '{}') "
                           "RETURNING seq").fetchone()
        assert row is not None and row[0] == 3
    assert (folder / "state.sqlite3").is_file()  # the folder is left as it was


def test_a_database_with_pier_state_is_refused_and_left_alone(tmp_path: Path,
                                                              postgres_server: PostgresServer) -> None:
    folder = _folder_with_state(tmp_path)
    url = postgres_server.database()
    assert _migrate(folder, url)[0] == 0
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM pier_state.models")
    code, output = _migrate(folder, url)
    assert code == 1
    assert "holds pier's state already" in output and "DROP SCHEMA pier_state CASCADE" in output
    with psycopg.connect(url) as conn:  # not one row written the second time
        row = conn.execute("SELECT count(*) FROM pier_state.models").fetchone()
        assert row is not None and row[0] == 0


def test_a_gateway_running_on_the_folder_is_refused(tmp_path: Path, postgres_server: PostgresServer) -> None:
    folder = tmp_path / "state"
    with holding(folder):  # as `pier up` holds its folder
        code, output = _migrate(folder, postgres_server.database())
    assert code == 1 and "Another pier gateway" in output


def test_a_url_that_is_not_postgresql_is_refused(tmp_path: Path) -> None:
    code, output = _migrate(tmp_path, "mysql://db/pier")
    assert code == 2 and "not a PostgreSQL URL" in output


@pytest.mark.parametrize(("value", "moved"), [("text", "text"), (b"caf\xc3\xa9", "café"), (1.5, 1.5), (None, None)])
def test_values_as_postgresql_keeps_them(value: object, moved: object) -> None:
    assert text_value(value, "row") == moved


def test_text_that_is_not_utf8_names_its_row() -> None:
    with pytest.raises(StateError, match=r"A row of models in state\.sqlite3 holds text that is not UTF-8"):
        text_value(b"\xff\xfe", "A row of models in state.sqlite3")


@pytest.mark.parametrize(("rows", "counted", "ok"), [(3, 3, True), (3, 2, False), (0, 0, True)])
def test_counts_that_differ_are_not_ok(rows: int, counted: int, ok: bool) -> None:
    assert Moved("pier_state", "models", rows, counted).ok is ok
