"""Which actors a new leader takes over as they are (`take_over.adoptable`): one whose model server runs; not one
that did not answer, died, answered what this pier cannot read, or has no model server running (its leader died
while starting it, or was stopping it), which is killed and started again by the reconciler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.backends.base import CopySpec
from pier.backends.ray.actor import Identity

ray_exceptions = pytest.importorskip("ray.exceptions", reason="the ray backend's tests need Ray")

from pier.backends.ray.take_over import adoptable  # noqa: E402  (after the skip: it imports Ray's exceptions)

SPEC = CopySpec("ic-1", "ic", Path("/m"))


def identity(serving: bool) -> Identity:
    return Identity(SPEC, "secret", "pier-instance-ic-0-ab", "node", "10.0.0.2", 0, 4242, serving)


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
