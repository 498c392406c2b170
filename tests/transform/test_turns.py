"""A job's turns: MaxConcurrentTransforms over all copies, and copies that will never take a record. Which copy
takes each record is the runtime's attempt loop's (tests/runtime/attempts)."""

from __future__ import annotations

import asyncio

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.transform.turns import CopiesFailed, Turns


def copy(name: str, state: CopyState = CopyState.READY, concurrency: int = 2, message: str = "") -> CopyStatus:
    return CopyStatus(name, "transform.j/AllTraffic", state, url=f"http://{name}", concurrency=concurrency,
                      message=message)


def test_max_concurrent_transforms_caps_the_records_in_flight() -> None:
    async def run() -> None:
        turns = Turns(lambda: [copy("a"), copy("b")], limit=2)
        async with turns.turn(), turns.turn():
            waiting = asyncio.create_task(_held(turns))
            await asyncio.sleep(0.05)
            assert not waiting.done() and turns.in_flight == 2  # both turns held: the third waits
        await asyncio.wait_for(waiting, 1)
        assert turns.in_flight == 0

    asyncio.run(run())


async def _held(turns: Turns) -> None:
    async with turns.turn():
        pass


def test_copies_that_all_failed_fail_the_job_with_their_words() -> None:
    turns = Turns(lambda: [copy("a", CopyState.FAILED, message="the model does not load: bad GGUF")])
    with pytest.raises(CopiesFailed, match="bad GGUF"):
        turns.check()


def test_copies_that_cannot_be_placed_fail_the_job_with_why() -> None:
    """A job whose copies the reconciler cannot place (a GPU type on a host without GPUs) has no copy at all: it
    waited InProgress for ever."""
    turns = Turns(lambda: [], problem=lambda: "ml.g5.xlarge needs 1 GPU; this host has none")
    with pytest.raises(CopiesFailed, match=r"cannot be placed: ml\.g5\.xlarge needs 1 GPU"):
        turns.check()
    assert Turns(lambda: [], problem=lambda: None).check() == []  # not placed yet: it waits
