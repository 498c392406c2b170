from __future__ import annotations

from pathlib import Path

import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.control.reconciler import Plan, Progress, next_status, plan

READY, STARTING, RESTARTING, FAILED, STOPPED = (
    CopyState.READY, CopyState.STARTING, CopyState.RESTARTING, CopyState.FAILED, CopyState.STOPPED)


def spec(copy_id: str) -> CopySpec:
    return CopySpec(copy_id, copy_id.split("-")[0], Path("/m"))


def status(copy_id: str, state: CopyState) -> CopyStatus:
    return CopyStatus(copy_id, copy_id.split("-")[0], state)


@pytest.mark.parametrize(("name", "desired", "actual", "start", "stop"), [
    ("nothing running: start everything", ["a-0", "a-1"], [], ["a-0", "a-1"], []),
    ("all running: nothing to do", ["a-0"], [("a-0", READY)], [], []),
    ("a copy still starting is left alone", ["a-0"], [("a-0", STARTING)], [], []),
    ("a copy being restarted by the backend is left alone", ["a-0"], [("a-0", RESTARTING)], [], []),
    ("a failed copy is not restarted in a loop (its status reports it)", ["a-0"], [("a-0", FAILED)], [], []),
    ("a stopped copy that is wanted starts again", ["a-0"], [("a-0", STOPPED)], ["a-0"], []),
    ("copy count 2 -> 1: the extra copy stops", ["a-0"], [("a-0", READY), ("a-1", READY)], [], ["a-1"]),
    ("a deleted component: all its copies stop", [], [("a-0", READY), ("a-1", STARTING)], [], ["a-0", "a-1"]),
    ("update: the old copy serves until the new one is ready",
     ["a-0x"], [("a-0", READY), ("a-0x", STARTING)], [], []),
    ("update: the old copy stops once the new one is ready",
     ["a-0x"], [("a-0", READY), ("a-0x", READY)], [], ["a-0"]),
    ("update: an old copy that is not ready is not worth keeping",
     ["a-0x"], [("a-0", RESTARTING), ("a-0x", STARTING)], [], ["a-0"]),
    ("one component's rollout does not hold back another's cleanup",
     ["a-0x", "b-0"], [("a-0", READY), ("a-0x", STARTING), ("b-0", READY), ("b-1", READY)], [], ["b-1"]),
    ("stopped copies nobody wants are not stopped twice", [], [("a-0", STOPPED)], [], []),
])
def test_plan(name: str, desired: list[str], actual: list[tuple[str, CopyState]], start: list[str],
              stop: list[str]) -> None:
    result = plan([spec(c) for c in desired], [status(c, s) for c, s in actual])
    assert result == Plan(tuple(spec(c) for c in start), tuple(stop)), name


@pytest.mark.parametrize(("name", "current", "progress", "expected"), [
    ("creating until every copy has been ready", "Creating", Progress(2, 1), ("Creating", "")),
    ("in service once every copy has been ready", "Creating", Progress(2, 2), ("InService", "")),
    ("no copies wanted: in service at once", "Creating", Progress(0, 0), ("InService", "")),
    ("a problem fails it, with the reason", "Creating", Progress(2, 0, "no room"), ("Failed", "no room")),
    ("updating ends in service", "Updating", Progress(1, 1), ("InService", "")),
    ("updating can fail", "Updating", Progress(3, 2, "no room"), ("Failed", "no room")),
    ("in service stays in service while a copy restarts", "InService", Progress(2, 1), ("InService", "")),
    ("in service is not failed by one copy giving up", "InService", Progress(2, 1, "copy failed"),
     ("InService", "")),
    ("failed heals once the problem is gone and copies are ready", "Failed", Progress(1, 1), ("InService", "")),
    ("failed stays failed while the problem stands", "Failed", Progress(1, 0, "still"), ("Failed", "still")),
    ("deleting stays deleting", "Deleting", Progress(0, 0), ("Deleting", "")),
    ("creating shows the conversion it waits on", "Creating", Progress(1, 0, step="Converting s3://b/m/ to GGUF: "
     "reading shard 3 of 6"), ("Creating", "Converting s3://b/m/ to GGUF: reading shard 3 of 6")),
    ("a conversion's step is no failure once in service", "InService", Progress(1, 1, step="x"), ("InService", "")),
])
def test_next_status(name: str, current: str, progress: Progress, expected: tuple[str, str]) -> None:
    assert next_status(current, progress) == expected, name
