"""The asynchronous inference queue in the state folder: what survives a restart, and in what order."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pier.async_inference.queue import FILE, AsyncQueue, AsyncRequest
from pier.gateway import state_files
from pier.state_folder.files import by_name
from pier.state_folder.store import Driver


def request(id: str, received: float, endpoint: str = "e") -> AsyncRequest:
    return AsyncRequest(id=id, inference_id=f"inference-{id}", endpoint=endpoint, output_location=f"s3://b/{id}.out",
                        failure_location=f"s3://b/{id}-error.out", received=received, ttl_s=60, timeout_s=900,
                        input_location="s3://b/in.json", content_type="application/json")


def test_requests_wait_oldest_first_and_leave_once_finished(tmp_path: Path, driver: Driver | None) -> None:
    queue = AsyncQueue.open(tmp_path, driver)
    for id, received in (("b", 2.0), ("a", 1.0), ("c", 3.0)):
        queue.add(request(id, received))
    assert [r.id for r in queue.waiting("e")] == ["a", "b", "c"]
    assert queue.start("a", "one") and not queue.start("a", "two")  # taken once
    assert queue.backlog() == {"e": (2, 1, 2.0)}
    assert queue.failed("a", "one")
    assert queue.start("b", "one")
    queue.release("b", "one")  # the gateway stopped while it ran: it waits again
    assert [r.id for r in queue.waiting()] == ["b", "c"]
    assert queue.waiting("e")[0] == request("b", 2.0)  # every field read back as written


def test_running_requests_wait_again_after_a_restart(tmp_path: Path, driver: Driver | None) -> None:
    queue = AsyncQueue.open(tmp_path, driver)
    queue.add(request("a", 1.0))
    queue.add(request("b", 2.0, endpoint="other"))
    assert queue.start("a", "one")
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    assert again.backlog() == {"e": (0, 1, None), "other": (1, 0, 2.0)}
    assert again.requeue_running() == 1
    assert [r.id for r in again.waiting("e")] == ["a"]
    assert [(w.id, w.ran) for w in again.pending("e")] == [("a", True)]  # looked for before it runs again


def test_state_check_counts_requests_and_names_a_bad_row(tmp_path: Path) -> None:
    queue = AsyncQueue.open(tmp_path)
    queue.add(request("a", 1.0))
    queue.close()
    with sqlite3.connect(tmp_path / FILE) as db:
        db.execute("INSERT INTO requests (id, endpoint, state, received, request) VALUES ('broken', 'e', 'queued', "
                   "2.0, '{not json')")
    report = state_files.ASYNC.check(tmp_path / FILE)
    assert report.records == {"async requests": 1}
    assert [(row.name, row.reason.split(" (")[0]) for row in report.unreadable] == [
        ("broken", "its request does not read")]
    assert [r.id for r in AsyncQueue.open(tmp_path).waiting()] == ["a"]  # the bad row is left for the check
    assert by_name(state_files.FILES, FILE) is state_files.ASYNC


def test_pending_names_queued_requests_and_when_they_expire_after_a_restart(tmp_path: Path,
                                                                            driver: Driver | None) -> None:
    queue = AsyncQueue.open(tmp_path, driver)
    for id, received in (("b", 2.0), ("a", 1.0)):
        queue.add(request(id, received))
    assert [(w.id, w.expires) for w in queue.pending("e")] == [("a", 61.0), ("b", 62.0)]
    queue.db.execute("INSERT INTO requests (id, endpoint, state, received, request) VALUES ('broken', 'e', 'queued', "
                     "3.0, '{not json')")
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    again.read_ttls()
    assert [(w.id, w.expires) for w in again.pending("e")] == [("a", 61.0), ("b", 62.0)]  # the bad row left out
    assert again.get("a") == request("a", 1.0) and again.get("broken") is None and again.get("none") is None
    fresh = AsyncQueue.open(tmp_path, driver)  # without read_ttls: each row is read once when first seen
    assert [w.id for w in fresh.pending("e")] == ["a", "b"]


def test_an_answered_request_never_waits_again(tmp_path: Path, driver: Driver | None) -> None:
    """What ran is the queue's record: an answered request is not rerun after a restart, and a stop that releases it
    once its answer is recorded leaves it answered; its notification is still to send."""
    queue = AsyncQueue.open(tmp_path, driver)
    for id, received in (("a", 1.0), ("b", 2.0)):
        queue.add(request(id, received))
        assert queue.start(id, "one")
    assert queue.answered("a", "one")
    queue.release("a", "one")  # the gateway stopping after the answer was recorded
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    if driver is None:
        assert state_files.ASYNC.check(tmp_path / FILE).records == {"async requests": 2}  # 'answered' is a state
    assert [r.id for r in again.answered_before()] == ["a"] and again.requeue_running() == 1
    assert again.remove_answered("a") and not again.remove_answered("a")  # removed once: one notification
    assert [r.id for r in again.waiting()] == ["b"] and again.backlog() == {"e": (1, 0, 2.0)}


def test_a_stale_claim_changes_nothing_once_another_run_took_the_request(tmp_path: Path,
                                                                        driver: Driver | None) -> None:
    """Issue 40: a leader whose lease lapsed while a request ran, its late writes after the next leader took the
    row: refused by the database, whatever they are."""
    queue = AsyncQueue.open(tmp_path, driver)
    queue.add(request("a", 1.0))
    assert queue.start("a", "old")
    assert queue.requeue_running() == 1  # the next leader starts
    assert queue.start("a", "new")
    assert not queue.answered("a", "old") and not queue.failed("a", "old")
    queue.release("a", "old")
    assert queue.backlog() == {"e": (0, 1, None)}  # still the new leader's
    assert queue.answered("a", "new") and queue.remove_answered("a") and queue.get("a") is None


def test_released_unrun_requests_are_not_looked_for(tmp_path: Path, driver: Driver | None) -> None:
    queue = AsyncQueue.open(tmp_path, driver)
    queue.add(request("a", 1.0))
    assert queue.start("a", "one")
    queue.release("a", "one", ran=False)  # no copy took it: nothing of it was written
    assert [(w.id, w.ran) for w in queue.pending("e")] == [("a", False)]


def test_a_version_1_queue_gains_its_claims_and_keeps_its_rows(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / FILE) as db:
        db.execute("CREATE TABLE requests (id TEXT PRIMARY KEY, endpoint TEXT NOT NULL, state TEXT NOT NULL, "
                   "received REAL NOT NULL, request TEXT NOT NULL)")
        db.execute("INSERT INTO requests VALUES ('a', 'e', 'running', 1.0, ?)", (request("a", 1.0).to_json(),))
        db.execute("PRAGMA user_version = 1")
    db.close()
    queue = AsyncQueue.open(tmp_path)
    assert queue.requeue_running() == 1
    assert [(w.id, w.ran) for w in queue.pending("e")] == [("a", False)]  # no claim kept by version 1
