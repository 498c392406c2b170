"""`pier state` finds the state folder where `pier up` and `pier keys` do."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from pier.cli import app


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
