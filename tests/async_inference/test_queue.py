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
    assert queue.start("a") and not queue.start("a")  # taken once
    assert queue.backlog() == {"e": (2, 1, 2.0)}
    queue.finish("a")
    assert queue.start("b")
    queue.release("b")  # the gateway stopped while it ran: it waits again
    assert [r.id for r in queue.waiting()] == ["b", "c"]
    assert queue.waiting("e")[0] == request("b", 2.0)  # every field read back as written


def test_running_requests_wait_again_after_a_restart(tmp_path: Path, driver: Driver | None) -> None:
    queue = AsyncQueue.open(tmp_path, driver)
    queue.add(request("a", 1.0))
    queue.add(request("b", 2.0, endpoint="other"))
    assert queue.start("a")
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    assert again.backlog() == {"e": (0, 1, None), "other": (1, 0, 2.0)}
    assert again.requeue_running() == 1
    assert [r.id for r in again.waiting("e")] == ["a"]


def test_state_check_counts_requests_and_names_a_bad_row(tmp_path: Path) -> None:
    queue = AsyncQueue.open(tmp_path)
    queue.add(request("a", 1.0))
    queue.close()
    with sqlite3.connect(tmp_path / FILE) as db:
        db.execute("INSERT INTO requests VALUES ('broken', 'e', 'queued', 2.0, '{not json')")
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
    queue.db.execute("INSERT INTO requests VALUES ('broken', 'e', 'queued', 3.0, '{not json')")
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    again.read_ttls()
    assert [(w.id, w.expires) for w in again.pending("e")] == [("a", 61.0), ("b", 62.0)]  # the bad row left out
    assert again.get("a") == request("a", 1.0) and again.get("broken") is None and again.get("none") is None
    fresh = AsyncQueue.open(tmp_path, driver)  # without read_ttls: each row is read once when first seen
    assert [w.id for w in fresh.pending("e")] == ["a", "b"]


def test_an_answered_request_never_waits_again(tmp_path: Path, driver: Driver | None) -> None:
    """What ran is the queue's record: an answered request is not rerun after a restart, and a stop that releases it
    while its answer is being written leaves it answered."""
    queue = AsyncQueue.open(tmp_path, driver)
    for id, received in (("a", 1.0), ("b", 2.0)):
        queue.add(request(id, received))
        assert queue.start(id)
    queue.answered("a")
    queue.release("a")  # the gateway stopping while the answer was written
    queue.close()
    again = AsyncQueue.open(tmp_path, driver)
    if driver is None:
        assert state_files.ASYNC.check(tmp_path / FILE).records == {"async requests": 2}  # 'answered' is a state
    assert again.finish_answered() == 1 and again.requeue_running() == 1
    assert [r.id for r in again.waiting()] == ["b"] and again.backlog() == {"e": (1, 0, 2.0)}
