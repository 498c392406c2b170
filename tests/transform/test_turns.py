from __future__ import annotations

import asyncio

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.transform.turns import CopiesFailed, Turns


def copy(name: str, state: CopyState = CopyState.READY, concurrency: int = 2, message: str = "") -> CopyStatus:
    return CopyStatus(name, "transform.j/AllTraffic", state, url=f"http://{name}", concurrency=concurrency,
                      message=message)


def test_every_turn_of_every_copy_is_handed_out_least_busy_first() -> None:
    async def run() -> list[str]:
        turns = Turns(lambda: [copy("a"), copy("b", concurrency=3)])
        taken = [(await turns.take()).copy_id for _ in range(5)]
        waiting = asyncio.create_task(turns.take())
        await asyncio.sleep(0.05)
        assert not waiting.done() and turns.in_flight == 5  # all five turns held: the sixth waits
        turns.give(copy("a"))
        assert (await asyncio.wait_for(waiting, 1)).copy_id == "a"
        return taken

    assert sorted(asyncio.run(run())) == ["a", "a", "b", "b", "b"]


def test_max_concurrent_transforms_caps_the_total_and_avoid_is_a_last_resort() -> None:
    async def run() -> None:
        turns = Turns(lambda: [copy("a"), copy("b")], limit=3)
        taken = [(await turns.take(avoid="a")).copy_id for _ in range(3)]
        assert taken == ["b", "b", "a"]  # the one to avoid only once the others are full
        assert turns.free("") is None

    asyncio.run(run())


def test_copies_that_all_failed_fail_the_job_with_their_words() -> None:
    turns = Turns(lambda: [copy("a", CopyState.FAILED, message="the model does not load: bad GGUF")])
    with pytest.raises(CopiesFailed, match="bad GGUF"):
        asyncio.run(turns.take())


def test_copies_that_cannot_be_placed_fail_the_job_with_why() -> None:
    """A job whose copies the reconciler cannot place (a GPU type on a host without GPUs) has no copy at all: it
    waited InProgress for ever."""
    turns = Turns(lambda: [], problem=lambda: "ml.g5.xlarge needs 1 GPU; this host has none")
    with pytest.raises(CopiesFailed, match=r"cannot be placed: ml\.g5\.xlarge needs 1 GPU"):
        turns.free("")
    assert Turns(lambda: [], problem=lambda: None).free("") is None  # not placed yet: it waits
