from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pier.control.records import ModelRecord
from pier.control.shapes import CreateModelInput
from pier.control.state import State


def model(name: str, created: float = 1.0) -> ModelRecord:
    request = CreateModelInput.model_validate({"ModelName": name, "PrimaryContainer": {"ModelDataUrl": "/m"}})
    return ModelRecord(name=name, arn=f"arn:{name.lower()}", created=created, request=request)


def test_records_survive_a_reopen(tmp_path: Path) -> None:
    state = State.open(tmp_path)
    assert state.models.insert(model("b", 2.0)) and state.models.insert(model("a", 3.0))
    state.close()
    again = State.open(tmp_path)
    assert [m.name for m in again.models.all()] == ["b", "a"]  # oldest first
    assert again.models.get("a") == model("a", 3.0)


def test_names_are_unique_regardless_of_case(tmp_path: Path) -> None:
    state = State.open(tmp_path)
    assert state.models.insert(model("Llama"))
    assert not state.models.insert(model("llama"))
    assert state.models.get("LLAMA") is not None
    assert state.models.delete("lLaMa") and not state.models.delete("llama")


def test_put_replaces(tmp_path: Path) -> None:
    state = State.open(tmp_path)
    state.models.put(model("m", 1.0))
    state.models.put(model("m", 1.0).model_copy(update={"arn": "changed"}))
    assert [m.arn for m in state.models.all()] == ["changed"]


def test_a_state_from_another_schema_is_refused_with_a_way_out(tmp_path: Path) -> None:
    State.open(tmp_path).close()
    db = sqlite3.connect(tmp_path / "state.sqlite3")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(RuntimeError, match=r"state schema 99.*another --state-dir"):
        State.open(tmp_path)
