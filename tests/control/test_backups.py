"""Backups of the state (SQLite's online backup), generations, restore, the check behind `pier state check`, and
the gateway's hold on its folder."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from pier.control import backups
from pier.control.backups import (
    BackupPolicy,
    Backups,
    GatewayLock,
    Watched,
    check,
    list_backups,
    lock_holder,
    restore,
)
from pier.control.resource_store import STATE_FILE, ResourceStore
from pier.env import SettingsError
from pier.gateway.state_files import FILES, STATE
from pier.state_folder.errors import StateError
from tests.control.test_resource_store import model


def test_a_backup_is_a_checked_private_copy_and_old_generations_go(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    made = []
    for i in range(4):
        state.models.insert(model(f"m{i}", float(i)))
        made.append(backups.backup(STATE, state.path, keep=2, now=1_700_000_000 + i))
    assert list_backups(tmp_path) == made[-2:]
    assert made[-1].name == "state-20231114T221323.000000Z.sqlite3"
    assert stat.S_IMODE(made[-1].stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "backups").stat().st_mode) == 0o700
    copy = ResourceStore(made[-1])
    assert [m.name for m in copy.models.all()] == ["m0", "m1", "m2", "m3"]
    copy.close()
    state.close()


def test_backing_up_while_the_gateway_writes(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    done = threading.Event()

    def write() -> None:
        i = 0
        while not done.is_set():
            state.models.insert(model(f"w{i}", float(i)))
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        copies = [backups.backup(STATE, state.path, keep=10) for _ in range(5)]
    finally:
        done.set()
        writer.join()
    for copy in copies:
        assert backups.backup_problem(STATE, copy) == ""


def test_a_damaged_state_never_pushes_a_good_backup_out(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("m"))
    good = backups.backup(STATE, state.path, keep=1)
    state.close()
    (tmp_path / STATE_FILE).write_bytes(b"garbage" * 1000)
    with pytest.raises(sqlite3.DatabaseError):
        backups.backup(STATE, tmp_path / STATE_FILE, keep=1)
    assert list_backups(tmp_path) == [good]
    assert [p.name for p in (tmp_path / "backups").iterdir()] == [good.name]  # no half-made file left


def test_restore_puts_the_newest_sound_backup_in_place_and_keeps_the_damaged_file(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("old"))
    older = backups.backup(STATE, state.path, now=1_700_000_000)
    state.models.insert(model("new"))
    newer = backups.backup(STATE, state.path, now=1_700_000_100)
    state.close()
    newest = tmp_path / "backups" / "state-20991231T000000.000000Z.sqlite3"
    newest.write_bytes(b"not a database at all")  # the newest is damaged: it is passed over
    (tmp_path / STATE_FILE).write_bytes(b"damaged")
    [restored] = restore(tmp_path, FILES, now=1_700_000_200)
    assert restored.backup == newer
    assert [p.name for p in restored.moved] == ["state.sqlite3.before-restore-20231114T221640Z"]
    assert restored.moved[0].read_bytes() == b"damaged"
    assert stat.S_IMODE((tmp_path / STATE_FILE).stat().st_mode) == 0o600
    again = ResourceStore.open(tmp_path)
    assert sorted(m.name for m in again.models.all()) == ["new", "old"]
    again.close()
    restore(tmp_path, FILES, Path(older.name))  # a backup named under backups/
    again = ResourceStore.open(tmp_path)
    assert [m.name for m in again.models.all()] == ["old"]
    again.close()
    with pytest.raises(StateError, match=r"cannot be restored: .*not a database"):
        restore(tmp_path, FILES, newest)
    with pytest.raises(StateError, match=r"No backup nope\.sqlite3; the backups under"):
        restore(tmp_path, FILES, Path("nope.sqlite3"))


def test_restore_without_backups_says_to_move_the_file_aside(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_bytes(b"damaged")
    with pytest.raises(StateError, match=r"There is no backup of state.sqlite3 under .*mv .*state.sqlite3 "
                                         r".*state.sqlite3.damaged"):
        restore(tmp_path, FILES)
    assert (tmp_path / STATE_FILE).read_bytes() == b"damaged"


def test_one_gateway_per_folder_and_no_restore_under_it(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    backups.backup(STATE, state.path)
    state.close()
    assert lock_holder(tmp_path) is None
    lock = GatewayLock.take(tmp_path)
    try:
        assert lock_holder(tmp_path) == str(os.getpid())
        with pytest.raises(StateError, match=rf"Another pier gateway \(pid {os.getpid()}\) is using"):
            GatewayLock.take(tmp_path)
        with pytest.raises(StateError, match=rf"A pier gateway \(pid {os.getpid()}\) is using .*stop it first"):
            restore(tmp_path, FILES)
    finally:
        lock.release()
    assert lock_holder(tmp_path) is None
    restore(tmp_path, FILES)


def test_check_reports_records_unreadable_rows_and_damage(tmp_path: Path) -> None:
    state_report, scaling, keys, *_ = check(tmp_path, FILES)
    assert state_report.problems == ["there is no state file (a gateway makes one when it first starts)"]
    assert scaling.ok and keys.ok and not scaling.present and not keys.present  # not made yet: nothing wrong
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("m"))
    with state.transaction() as db:
        db.execute("INSERT INTO endpoints (name, created, body) VALUES ('broken', 1, '{\"name\": 3}')")
    report = check(tmp_path, FILES)[0]
    assert report.records == {"models": 1, "endpoint_configs": 0, "endpoints": 0, "inference_components": 0}
    assert [(r.kind, r.name) for r in report.unreadable] == [("endpoint", "broken")]
    assert not report.ok and "only the rows above do not read" in report.advice()
    state.close()
    (tmp_path / STATE_FILE).write_bytes((tmp_path / STATE_FILE).read_bytes()[:3000])
    report = check(tmp_path, FILES)[0]
    assert report.problems and "malformed" in report.problems[0]
    assert "pier state check" in report.advice()


def test_the_schedule_backs_up_what_changed_and_only_that(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    saver = Backups([Watched(STATE, state.path, lambda: state.changes)], BackupPolicy(every_s=0.01, keep=3))
    assert saver.take(starting=True)  # none yet
    assert saver.take() == [] and saver.take(starting=True) == []  # nothing changed since
    state.models.insert(model("m"))
    assert saver.take()
    assert saver.take() == []

    async def run_a_while() -> None:
        task = asyncio.create_task(saver.run())
        for i in range(5):
            state.models.insert(model(f"x{i}"))
            await asyncio.sleep(0.1)
        task.cancel()

    asyncio.run(run_a_while())
    assert len(list_backups(tmp_path)) == 3  # kept to the policy's generations
    state.close()


@pytest.mark.parametrize(("env", "policy"), [
    ({}, BackupPolicy(900.0, 5)),
    ({"PIER_STATE_BACKUP_MINUTES": "1.5", "PIER_STATE_BACKUPS": "2"}, BackupPolicy(90.0, 2)),
])
def test_the_policy_from_the_environment(env: dict[str, str], policy: BackupPolicy) -> None:
    assert BackupPolicy.from_env(env) == policy


def test_a_wrong_policy_setting_is_refused() -> None:
    with pytest.raises(SettingsError, match="PIER_STATE_BACKUPS='0' is not a positive number"):
        BackupPolicy.from_env({"PIER_STATE_BACKUPS": "0"})


def _break_model(state: ResourceStore, name: str) -> None:
    with state.transaction() as db:
        db.execute("UPDATE models SET body = 'not json' WHERE name = ?", (name,))


def test_restore_passes_over_backups_with_a_bad_row_and_says_what_it_lacks(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("kept"))
    good = backups.backup(STATE, state.path, now=1_700_000_000)
    state.models.insert(model("later"))
    _break_model(state, "kept")
    newer = backups.backup(STATE, state.path, now=1_700_000_100)
    assert "rows that do not read: model kept" in backups.backup_problem(STATE, newer)
    state.close()
    [restored] = restore(tmp_path, FILES, now=1_700_000_200)
    assert restored.backup == good
    assert (restored.lacks, restored.adds, restored.unknown) == (("model later",), (), "")
    again = ResourceStore.open(tmp_path)
    assert [m.name for m in again.models.all()] == ["kept"] and again.models.unreadable() == []
    again.close()


def test_the_newest_good_generation_outlives_the_count_while_newer_ones_hold_a_bad_row(tmp_path: Path) -> None:
    state = ResourceStore.open(tmp_path)
    state.models.insert(model("m"))
    good = backups.backup(STATE, state.path, keep=2, now=1_700_000_000)
    _break_model(state, "m")
    later = [backups.backup(STATE, state.path, keep=2, now=1_700_000_001 + i) for i in range(3)]
    assert list_backups(tmp_path) == [good, *later[-2:]]
    state.close()
