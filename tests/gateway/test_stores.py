"""The gateway's stores: every declared store opened, backed up and closed from its one line in STORES."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.control.resource_store import ResourceStore
from pier.gateway import state_files
from pier.gateway.stores import OpenStores
from pier.runtime.session_store import SessionStore
from pier.state_folder.errors import StateDamaged
from pier.state_folder.store import Driver
from pier.transform.transform_store import TransformStore


def test_every_declared_store_is_a_listed_file_and_is_watched(tmp_path: Path) -> None:
    assert [f.name for f in state_files.FILES] == [
        "state.sqlite3", "autoscaling.sqlite3", "keys.json", "sessions.sqlite3", "async.sqlite3", "transforms.sqlite3"]
    stores = OpenStores(tmp_path)
    assert [w.path.name for w in stores.watched()] == [
        "state.sqlite3", "autoscaling.sqlite3", "sessions.sqlite3", "async.sqlite3", "transforms.sqlite3", "keys.json"]
    state = stores.get(ResourceStore)
    watched = stores.watched()[0]
    with state.transaction() as db:
        db.execute("INSERT INTO models (name, created, body) VALUES ('m', 0, '{}')")
    assert watched.mark() != watched.saved  # a write makes a backup due
    stores.close()


@pytest.mark.parametrize(("damaged", "serving_sessions"), [
    ("sessions.sqlite3", False),  # a cache: the gateway serves without it
    (None, True),
])
def test_a_store_the_gateway_serves_without_is_left_out(tmp_path: Path, damaged: str | None,
                                                         serving_sessions: bool) -> None:
    if damaged:
        (tmp_path / damaged).write_bytes(b"garbage" * 1000)
    stores = OpenStores(tmp_path)
    assert (stores.serving(SessionStore) is not None) == serving_sessions
    assert ("sessions.sqlite3" in [w.path.name for w in stores.watched()]) == serving_sessions
    stores.close()


def test_a_damaged_store_stops_the_start_and_closes_those_opened_before(tmp_path: Path) -> None:
    (tmp_path / "transforms.sqlite3").write_bytes(b"garbage" * 1000)
    opened: list[ResourceStore] = []
    real = ResourceStore.for_gateway.__func__  # type: ignore[attr-defined]

    class Seen(ResourceStore):
        @classmethod
        def for_gateway(cls, state_dir: Path, driver: Driver | None = None) -> ResourceStore | None:
            found = real(cls, state_dir, driver)
            opened.append(found)
            return found

    with pytest.raises(StateDamaged):
        OpenStores(tmp_path, (Seen, TransformStore))
    with pytest.raises(Exception, match="closed"):
        opened[0].models.all()
