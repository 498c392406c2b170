from __future__ import annotations

import os
import random
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest

from pier.control.records import ModelRecord
from pier.control.resource_store import SCHEMA_VERSION, STATE_FILE, ResourceStore, UnreadableRecord
from pier.control.shapes import CreateModelInput
from pier.state_folder.errors import StateDamaged
from pier.state_folder.store import Driver


def model(name: str, created: float = 1.0) -> ModelRecord:
    request = CreateModelInput.model_validate({"ModelName": name, "PrimaryContainer": {"ModelDataUrl": "/m"}})
    return ModelRecord(name=name, arn=f"arn:{name.lower()}", created=created, request=request)


def test_records_survive_a_reopen(tmp_path: Path, driver: Driver | None) -> None:
    state = ResourceStore.open(tmp_path, driver)
    assert state.models.insert(model("b", 2.0)) and state.models.insert(model("a", 3.0))
    state.close()
    again = ResourceStore.open(tmp_path, driver)
    assert [m.name for m in again.models.all()] == ["b", "a"]  # oldest first
    assert again.models.get("a") == model("a", 3.0)


def test_names_are_unique_regardless_of_case(tmp_path: Path, driver: Driver | None) -> None:
    state = ResourceStore.open(tmp_path, driver)
    assert state.models.insert(model("Llama"))
    assert not state.models.insert(model("llama"))
    assert state.models.get("LLAMA") is not None
    assert state.models.delete("lLaMa") and not state.models.delete("llama")


def test_put_replaces(tmp_path: Path, driver: Driver | None) -> None:
    state = ResourceStore.open(tmp_path, driver)
    state.models.put(model("m", 1.0))
    state.models.put(model("m", 1.0).model_copy(update={"arn": "changed"}))
    assert [m.arn for m in state.models.all()] == ["changed"]


def test_replace_and_delete_if_write_only_over_the_record_they_were_decided_on(tmp_path: Path,
                                                                               driver: Driver | None) -> None:
    state = ResourceStore.open(tmp_path, driver)
    read = model("m", 1.0)
    state.models.put(read)
    state.models.put(read.model_copy(update={"arn": "changed meanwhile"}))
    assert not state.models.replace(read, read.model_copy(update={"arn": "stale"}))
    assert not state.models.delete_if(read)
    [kept] = state.models.all()
    assert kept.arn == "changed meanwhile"
    assert state.models.replace(kept, kept.model_copy(update={"arn": "next"}))
    assert state.models.delete_if(state.models.get("m"))  # type: ignore[arg-type]
    assert state.models.all() == [] and not state.models.replace(kept, kept)


def test_a_state_from_another_schema_is_refused_with_a_way_out(tmp_path: Path) -> None:
    ResourceStore.open(tmp_path).close()
    db = sqlite3.connect(tmp_path / "state.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(RuntimeError, match=r"state schema 99.*another --state-dir"):
        ResourceStore.open(tmp_path)


# ---- written safely


def test_a_change_that_fails_midway_leaves_nothing_behind(tmp_path: Path, driver: Driver | None) -> None:
    state = ResourceStore.open(tmp_path, driver)
    with pytest.raises(RuntimeError, match="midway"), state.transaction():
        state.models.insert(model("a"))
        state.models.insert(model("b"))
        raise RuntimeError("midway")
    assert state.models.all() == []
    with state.transaction():
        state.models.insert(model("kept"))
        with pytest.raises(RuntimeError), state.transaction():  # a nested failure undoes only its own part
            state.models.insert(model("undone"))
            raise RuntimeError
    assert [m.name for m in state.models.all()] == ["kept"]


def test_the_state_is_private_and_written_ahead(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    state = ResourceStore.open(folder)
    state.models.insert(model("m"))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["state.sqlite3", "state.sqlite3-shm", "state.sqlite3-wal"]  # no half-made file left over
    for name in files:
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, name
    with state.cursor() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert cursor.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


# ---- a damaged file is refused, never replaced


def _saved_state(folder: Path, count: int = 200) -> Path:
    state = ResourceStore.open(folder)
    for i in range(count):
        state.models.insert(model(f"m{i}", float(i)))
    state.close()  # checkpoints: the file holds everything
    return folder / STATE_FILE


@pytest.mark.parametrize(("damage", "problem"), [
    (lambda data: data[: len(data) // 2], "database disk image is malformed"),
    (lambda data: data[:100], "database disk image is malformed"),
    (lambda data: bytes(random.Random(1).getrandbits(8) for _ in range(len(data))), "file is not a database"),
    (lambda data: b"", "the file is empty (0 bytes)"),
    (lambda data: data[:8192] + b"\xff" * 4096 + data[12288:], "SQLite's quick check found"),
])
def test_a_damaged_file_is_refused_untouched_with_the_way_out(tmp_path: Path, damage: Any, problem: str) -> None:
    path = _saved_state(tmp_path)
    damaged = damage(path.read_bytes())
    path.write_bytes(damaged)
    with pytest.raises(StateDamaged) as raised:
        ResourceStore.open(tmp_path)
    message = raised.value.message
    assert str(path) in message and problem in message
    assert f"pier state restore --state-dir {tmp_path}" not in message  # no backup to offer yet
    assert f"mv {path} {path}.damaged" in message and f"pier state check --state-dir {tmp_path}" in message
    assert path.read_bytes() == damaged  # not one byte changed
    (tmp_path / "backups").mkdir()
    (tmp_path / "backups" / "state-20250101T000000.000000Z.sqlite3").write_bytes(b"")
    with pytest.raises(StateDamaged, match=rf"the newest is state-20250101T000000.000000Z.sqlite3\):  pier state "
                                           rf"restore --state-dir {tmp_path}"):
        ResourceStore.open(tmp_path)


def test_a_missing_table_or_a_lone_log_is_damage(tmp_path: Path) -> None:
    path = _saved_state(tmp_path, 1)
    db = sqlite3.connect(path)
    db.execute("DROP TABLE endpoints")
    db.commit()
    db.close()
    with pytest.raises(StateDamaged, match=r"table\(s\) endpoints are gone"):
        ResourceStore.open(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "state.sqlite3-wal").write_bytes(b"x" * 100)
    with pytest.raises(StateDamaged, match="the file is missing but its write-ahead log"):
        ResourceStore.open(other)


# ---- one unreadable row makes only that resource unreadable


def _raw(state: ResourceStore, table: str, name: str, body: bytes | str, created: float = 5.0) -> None:
    with state.transaction() as db:
        db.execute(f"INSERT INTO {table} (name, created, body) VALUES (?, ?, ?)", (name, created, body))


@pytest.mark.parametrize(("body", "reason"), [
    ("not json at all", "does not read as one"),
    (b"\xff\xfe garbage bytes", "does not read as one"),
    ('{"name": "bad", "arn": "a", "created": 1.0, "request": {"ModelName": "bad"}}', "request: Value error"),
    ('{"name": "bad", "arn": "a", "created": 1.0, "request": {"ModelName": "bad", "PrimaryContainer": '
     '{"ModelDataUrl": "/m"}}, "schema_from_the_future": 1, "created_by": []}', None),  # extra members still read
    ('{"name": "other", "arn": "a", "created": 1.0, "request": {"ModelName": "other", "PrimaryContainer": '
     '{"ModelDataUrl": "/m"}}}', "the stored record is named 'other', not 'bad'"),
])
def test_one_bad_row_is_named_and_the_rest_keep_working(tmp_path: Path, body: bytes | str, reason: str | None) -> None:
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("good", 1.0))
    _raw(state, "models", "bad", body)
    if reason is None:
        assert [m.name for m in state.models.all()] == ["good", "bad"]
        return
    good, bad = state.models.scan()
    assert [m.name for m in good] == ["good"] and state.models.all() == good
    [row] = bad
    assert (row.kind, row.name, row.created) == ("model", "bad", 5.0) and reason in row.reason
    with pytest.raises(UnreadableRecord, match=r'Model "bad": pier cannot read its stored record'):
        state.models.get("BAD")
    assert state.models.get("good") == model("good", 1.0)
    assert not state.models.insert(model("bad"))  # the name stays taken until the row is deleted
    assert state.models.delete("bad") and state.models.unreadable() == []
