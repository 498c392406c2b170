"""The leader's copies published for the followers (`pier.gateway.copy_board`): what a follower routes by is what the
leader's router saw (URL, secret, concurrency, draining copies not ready), and what it lists is what the leader lists
(pid, kernels, placement, the log's file, the owner), on SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus, Instance
from pier.control.workload import Workload
from pier.gateway import copy_board
from pier.gateway.copy_board import CopyBoard, as_row, from_row, led_copies, routed
from pier.gateway.listed_copy import ListedCopy, placement
from pier.state_folder.postgres import Postgres
from pier.state_folder.store import Driver
from tests.postgres import PostgresServer

READY = CopyStatus("e--v-0", "e/v", CopyState.READY, url="http://127.0.0.1:41237", secret="s3cret", concurrency=4,
                   pid=1234, kernels="avx2")
STARTING = CopyStatus("c-0", "c", CopyState.STARTING, message="loading the model", restarts=2)


SPEC = CopySpec("e--v-0", "e/v", Path("/m"), cores=(2, 3), accelerators=1, gpus=("1",),
                instance=Instance("e/v", 0, "ml.g5.xlarge", 4, 16384, 1))
LISTED = ListedCopy(READY, READY, placement(SPEC), "/state/copies/e--v-0/copy.log", "host-a:8080 (pid 1, 9f8e7d)")
DRAINING = ListedCopy(READY, dataclasses.replace(READY, state=CopyState.STARTING, message="draining: stopped by pier"),
                      placement(SPEC), None, "host-a")
NEVER_PLACED = ListedCopy(STARTING, STARTING, placement(None), None, None)


@pytest.mark.parametrize("copy", [LISTED, DRAINING, NEVER_PLACED], ids=["ready", "draining", "never placed"])
def test_a_copy_reads_back_as_it_was_published(copy: ListedCopy) -> None:
    read = from_row(as_row(copy, 1.0)[2])
    assert read == copy
    assert read.status.pid == copy.status.pid and read.status.kernels == copy.status.kernels  # compared too, but said
    assert (read.routed.secret, read.status.secret) == (copy.routed.secret, copy.routed.secret)  # compare=False
    assert read.as_json() == copy.as_json() and "secret" not in read.as_json()


def test_a_row_of_a_leader_before_the_listing_reads_as_routed() -> None:
    body = json.loads(as_row(LISTED, 1.0)[2])
    del body["listed"]
    read = from_row(json.dumps(body))
    routed_only = CopyStatus(READY.copy_id, READY.component, READY.state, url=READY.url, secret=READY.secret,
                             concurrency=READY.concurrency)
    assert (read.status, read.routed, read.placement, read.log_file, read.owner) == (
        routed_only, routed_only, placement(None), None, None)


def test_the_listing_shows_where_the_copy_runs_and_who_owns_it() -> None:
    row = LISTED.as_json()
    assert {name: row[name] for name in ("pid", "kernels", "instance", "instance_type", "cores", "device", "gpus",
                                         "owner")} == {
        "pid": 1234, "kernels": "avx2", "instance": "e/v#0", "instance_type": "ml.g5.xlarge", "cores": [2, 3],
        "device": "gpu", "gpus": ["1"], "owner": "host-a:8080 (pid 1, 9f8e7d)"}


def test_what_the_leader_publishes_a_follower_routes_by_and_lists(tmp_path: Path, driver: Driver | None,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copy_board, "REREAD_S", 0.0)
    monkeypatch.setattr(copy_board, "MISS_REREAD_S", 0.0)
    leader, follower = CopyBoard.open(tmp_path, driver), CopyBoard.open(tmp_path, driver)
    try:
        leader.publish([DRAINING, NEVER_PLACED])
        assert follower.copies(Workload("e/v")) == [DRAINING.routed]  # routed as the leader's router sees it
        assert follower.copies(Workload("e/v"))[0].secret == "s3cret"
        assert follower.copies(Workload("c")) == [STARTING]
        assert follower.listed() == [NEVER_PLACED, DRAINING]  # by copy id
        assert follower.listed()[1].status.state is CopyState.READY  # listed as the leader lists it
        leader.publish([NEVER_PLACED])  # the leader's copy of e/v is gone
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
        board.publish([LISTED])
        own = [CopyStatus("mine", "e/v", CopyState.READY, url="http://127.0.0.1:1")]
        copies = routed(board, lambda: owning, lambda workload: own)(Workload("e/v"))
        assert copies == (own if expected == "own" else [READY])
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
        leader.publish([NEVER_PLACED])
        assert [c.state for c in follower.copies(Workload("c"))] == [CopyState.STARTING]
        assert follower.copies(Workload("e/v")) == []
        started = dataclasses.replace(STARTING, state=CopyState.READY)
        leader.publish([ListedCopy(started, started, placement(None), None, None), LISTED])
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
        leader.publish([LISTED])
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
