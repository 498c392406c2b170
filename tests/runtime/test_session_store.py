"""The open sessions' store on SQLite and on PostgreSQL: the newest sessions not expired, oldest first."""

from __future__ import annotations

from pathlib import Path

from pier.runtime.session_store import SessionStore
from pier.state_folder.store import Driver


def test_sessions_are_kept_until_they_expire_and_a_move_writes_over(tmp_path: Path, driver: Driver | None) -> None:
    store = SessionStore.open(tmp_path, driver)
    store.put("s1", "e", "ic", "copy-1", 100.0)
    store.put("s2", "e", "ic", "copy-1", 200.0)
    store.put("s3", "e", "ic", "copy-2", 50.0)
    store.put("s1", "e", "ic", "copy-2", 300.0)  # moved to another copy
    store.close()
    again = SessionStore.open(tmp_path, driver)
    assert again.load(now=60.0, limit=10) == [("s2", "e", "ic", "copy-1", 200.0), ("s1", "e", "ic", "copy-2", 300.0)]
    again.delete(["s2"])
    assert [s[0] for s in again.load(now=60.0, limit=10)] == ["s1"]
    assert again.load(now=60.0, limit=0) == []
    again.close()
