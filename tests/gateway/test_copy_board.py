"""The leader's copies published for the followers (`pier.gateway.copy_board`): what a follower routes by is what the
leader's router saw (URL, secret, concurrency, draining copies not ready), on SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.control.workload import Workload
from pier.gateway import copy_board
from pier.gateway.copy_board import CopyBoard, as_row, from_row, led_copies, routed
from pier.state_folder.postgres import Postgres
from pier.state_folder.store import Driver
from tests.postgres import PostgresServer

READY = CopyStatus("e--v-0", "e/v", CopyState.READY, url="http://127.0.0.1:41237", secret="s3cret", concurrency=4,
                   pid=1234, kernels="avx2")
STARTING = CopyStatus("c-0", "c", CopyState.STARTING, message="loading the model", restarts=2)


@pytest.mark.parametrize("status", [READY, STARTING])
def test_a_status_reads_back_as_the_router_needs_it(status: CopyStatus) -> None:
    read = from_row(as_row(status, 1.0)[2])
    assert read == CopyStatus(status.copy_id, status.component, status.state, url=status.url, message=status.message,
                              restarts=status.restarts, concurrency=status.concurrency)
    assert read.secret == status.secret  # compare=False on the dataclass: checked on its own


def test_what_the_leader_publishes_a_follower_routes_by(tmp_path: Path, driver: Driver | None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_board, "REREAD_S", 0.0)
    leader, follower = CopyBoard.open(tmp_path, driver), CopyBoard.open(tmp_path, driver)
    try:
        leader.publish([READY, STARTING])
        assert follower.copies(Workload("e/v")) == [from_row(as_row(READY, 0)[2])]  # pid, kernels: the leader's
        assert follower.copies(Workload("e/v"))[0].secret == "s3cret"
        assert follower.copies(Workload("c")) == [from_row(as_row(STARTING, 0)[2])]
        leader.publish([STARTING])  # the leader's copy of e/v is gone
        assert follower.copies(Workload("e/v")) == []
    finally:
        leader.close()
        follower.close()


def test_draining_copies_are_published_as_the_leader_routes_them() -> None:
    def copies_of(workload: Workload) -> list[CopyStatus]:
        return [CopyStatus("e--v-0", "e/v", CopyState.STARTING, message="draining")] if workload == "e/v" else []

    assert [c.message for c in led_copies([READY, READY], copies_of)] == ["draining"]


@pytest.mark.parametrize(("owning", "expected"), [(True, "own"), (False, "board")])
def test_a_follower_routes_by_the_board_a_leader_by_its_own(tmp_path: Path, owning: bool, expected: str) -> None:
    board = CopyBoard.open(tmp_path)
    try:
        board.publish([READY])
        own = [CopyStatus("mine", "e/v", CopyState.READY, url="http://127.0.0.1:1")]
        copies = routed(board, lambda: owning, lambda workload: own)(Workload("e/v"))
        assert copies == (own if expected == "own" else [from_row(as_row(READY, 0)[2])])
    finally:
        board.close()


def test_alone_on_a_folder_a_gateway_routes_by_its_own() -> None:
    def own(workload: Workload) -> list[CopyStatus]:
        return []

    assert routed(None, lambda: False, own) is own


def test_a_follower_with_no_ready_copy_of_a_workload_reads_the_board_again_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader publishes a copy ready before it stores the status or the deployment step that sends traffic to
    it; a follower reading that step finds the copy ready rather than its half-second-old list."""
    monkeypatch.setattr(copy_board, "REREAD_S", 60.0)
    monkeypatch.setattr(copy_board, "MISS_REREAD_S", 0.0)
    leader, follower = CopyBoard.open(tmp_path), CopyBoard.open(tmp_path)
    try:
        leader.publish([STARTING])
        assert [c.state for c in follower.copies(Workload("c"))] == [CopyState.STARTING]
        assert follower.copies(Workload("e/v")) == []
        leader.publish([dataclasses.replace(STARTING, state=CopyState.READY), READY])
        assert [c.state for c in follower.copies(Workload("e/v"))] == [CopyState.READY]
        assert [c.state for c in follower.copies(Workload("c"))] == [CopyState.READY]
        leader.publish([])
        assert len(follower.copies(Workload("e/v"))) == 1  # a ready copy listed: read again every REREAD_S only
    finally:
        leader.close()
        follower.close()


def test_while_the_database_is_away_a_follower_routes_as_last_read(tmp_path: Path, postgres_server: PostgresServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_board, "REREAD_S", 0.0)
    driver = Postgres(postgres_server.database())
    leader, follower = CopyBoard.open(tmp_path, driver), CopyBoard.open(tmp_path, driver)
    try:
        leader.publish([READY])
        assert len(follower.copies(Workload("e/v"))) == 1
        postgres_server.halt()
        try:
            assert len(follower.copies(Workload("e/v"))) == 1
        finally:
            postgres_server.start()
        leader.publish([])
        assert follower.copies(Workload("e/v")) == []  # read again once it is back
    finally:
        leader.close()
        follower.close()
