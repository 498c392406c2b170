"""Which actors a new leader takes over as they are (`take_over.adoptable`): one whose model server runs; not one
that did not answer, died, answered what this pier cannot read, or has no model server running (its leader died
while starting it, or was stopping it), which is killed and started again by the reconciler. A copy taken over
is what its actor said it is (`take_over.as_it_is`): a ready copy serves at once, under the new leader too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.backends.base import CopySpec, CopyState, CopyStatus
from pier.backends.ray.actor import Identity
from pier.backends.ray.log_mirror import LogMirror

ray_exceptions = pytest.importorskip("ray.exceptions", reason="the ray backend's tests need Ray")

from pier.backends.ray.take_over import adoptable, as_it_is  # noqa: E402  (after the skip: it imports Ray's)

SPEC = CopySpec("ic-1", "ic", Path("/m"))


READY = CopyStatus("ic-1", "ic", CopyState.READY, url="http://10.0.0.2:41237", restarts=1, pid=4343, secret="secret",
                   concurrency=4, kernels="avx2")


def identity(serving: bool, status: CopyStatus | None = None) -> Identity:
    return Identity(SPEC, "secret", "pier-instance-ic-0-ab", "node", "10.0.0.2", 0, 4242, serving, status)


@pytest.mark.parametrize(("answer", "why"), [
    (identity(serving=True), ""),
    (identity(serving=False), "its model server is not running"),
    (ray_exceptions.GetTimeoutError("late"), "no answer in time"),
    (ray_exceptions.RayActorError(), "RayActorError"),
    ({"spec": "from another pier"}, "an answer of a pier this one cannot read (dict)"),
])
def test_only_an_actor_whose_model_server_runs_is_taken_over(answer: Any, why: str) -> None:
    assert adoptable(answer).startswith(why) and bool(adoptable(answer)) == bool(why)


def test_an_actor_of_a_pier_before_the_serving_field_is_taken_over() -> None:
    old = identity(serving=False)
    del old.__dict__["serving"]  # unpickled from an actor whose Identity had no such field: the class default
    assert adoptable(old) == ""


def test_a_ready_copy_taken_over_is_ready_at_once_as_its_actor_said(tmp_path: Path) -> None:
    copy = as_it_is(identity(serving=True, status=READY), LogMirror(tmp_path), actor="handle")
    assert copy.status() == READY and copy.status().secret == "secret"  # routed to at once: the same URL, process
    assert (copy.adopted, copy.actor, copy.group, copy.node_id, copy.was_ready) == (
        True, "handle", "pier-instance-ic-0-ab", "node", True)


def test_a_copy_whose_actor_said_only_who_it_is_waits_for_its_first_report(tmp_path: Path) -> None:
    old = identity(serving=True)  # an actor of a pier before the status field
    copy = as_it_is(old, LogMirror(tmp_path), actor="handle")
    assert (copy.state, copy.url, copy.message) == (CopyState.STARTING, None, "taken over from an earlier gateway")
