"""Admission: a component takes what its ready copies take (each its own concurrency); the rest wait in a
bounded FIFO queue and go to the first copy with room."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.copy_choice import Lease
from pier.runtime.errors import Throttled
from pier.runtime.routing_strategy import RequestRouting

pytestmark = pytest.mark.anyio


def copy(copy_id: str, concurrency: int | None = 1, state: CopyState = CopyState.READY) -> CopyStatus:
    return CopyStatus(copy_id, "ic", state, url=f"http://127.0.0.1/{copy_id}", pid=1, concurrency=concurrency)


class Held:
    """Requests that hold their lease until released one by one, recording which copy each got."""

    def __init__(self, admission: Admission, component: str = "ic") -> None:
        self.admission = admission
        self.component = component
        self.got: dict[str, str] = {}  # request -> copy id
        self.leases: dict[str, Lease] = {}
        self.peak: dict[str, int] = {}  # copy id -> most outstanding seen on it
        self.tasks: dict[str, asyncio.Task[None]] = {}

    def send(self, name: str, copies: Sequence[CopyStatus], *, timeout_s: float | None = None,
             exclude: Sequence[str] = ()) -> asyncio.Task[None]:
        async def run() -> None:
            lease = await self.admission.lease(self.component, copies, exclude=exclude, timeout_s=timeout_s)
            assert lease is not None
            self.got[name] = lease.copy.copy_id
            self.leases[name] = lease
            chooser = self.admission.chooser(self.component)
            for c in copies:
                self.peak[c.copy_id] = max(self.peak.get(c.copy_id, 0), chooser.outstanding(c.copy_id))

        self.tasks[name] = asyncio.create_task(run())
        return self.tasks[name]

    def finish(self, name: str) -> None:
        self.leases.pop(name).release()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_ready_copies_take_their_concurrency_then_the_rest_wait_in_order() -> None:
    admission = Admission(AdmissionLimits(queue=10))
    held, copies = Held(admission), [copy("a", 2), copy("b", 1)]
    for i in range(6):
        held.send(str(i), copies)
    await settle()
    assert held.got == {"0": "a", "1": "b", "2": "a"}  # 2 + 1: the component takes what its copies take
    assert admission.in_use("ic") == 3 and admission.waiting("ic") == 3
    held.finish("1")  # b frees up: the oldest waiter goes there
    await settle()
    assert held.got["3"] == "b" and "4" not in held.got
    held.finish("0")
    held.finish("2")
    await settle()
    assert (held.got["4"], held.got["5"]) == ("a", "a")
    assert held.peak == {"a": 2, "b": 1}  # never more than a copy takes
    for name in list(held.leases):
        held.finish(name)
    assert admission.in_use("ic") == 0 and admission.waiting("ic") == 0


@pytest.mark.parametrize(
    # (capacities of the copies, queue, requests) -> (admitted at once, waiting, refused)
    ("capacities", "queue", "requests", "expected"),
    [
        ((1,), 0, 4, (1, 0, 3)),
        ((1,), 2, 4, (1, 2, 1)),
        ((2,), 1, 4, (2, 1, 1)),
        ((4,), 0, 4, (4, 0, 0)),
        ((1, 1), 1, 4, (2, 1, 1)),
        ((2, 3), 0, 6, (5, 0, 1)),
    ],
)
async def test_a_full_queue_refuses_at_once(capacities: tuple[int, ...], queue: int, requests: int,
                                            expected: tuple[int, int, int]) -> None:
    admission = Admission(AdmissionLimits(queue=queue))
    held = Held(admission)
    copies = [copy(f"c{i}", capacity) for i, capacity in enumerate(capacities)]
    tasks = [held.send(str(i), copies) for i in range(requests)]
    await settle()
    refused = [t for t in tasks if t.done() and isinstance(t.exception(), Throttled)]
    assert (len(held.got), admission.waiting("ic"), len(refused)) == expected
    assert all("is busy" in str(t.exception()) for t in refused)
    while held.leases:
        held.finish(next(iter(held.leases)))
        await settle()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert len(held.got) == requests - len(refused)


async def test_waiting_is_bounded_by_the_timeout() -> None:
    admission = Admission()
    held, copies = Held(admission), [copy("a")]
    held.send("first", copies)
    await settle()
    with pytest.raises(Throttled, match=r"no copy had room within 0\.1 s"):
        await held.send("late", copies, timeout_s=0.1)
    assert admission.waiting("ic") == 0
    held.finish("first")
    assert admission.in_use("ic") == 0


async def test_a_cancelled_waiter_leaves_the_queue_and_the_room_passes_on() -> None:
    admission = Admission()
    held, copies = Held(admission), [copy("a")]
    held.send("first", copies)
    gone = held.send("gone", copies)
    held.send("last", copies)
    await settle()
    gone.cancel()
    await settle()
    assert admission.waiting("ic") == 1
    held.finish("first")
    await settle()
    assert list(held.got) == ["first", "last"]


async def test_a_waiter_cancelled_just_as_its_lease_is_handed_over_gives_it_back() -> None:
    admission = Admission()
    held, copies = Held(admission), [copy("a")]
    held.send("first", copies)
    second = held.send("second", copies)
    held.send("third", copies)
    await settle()
    held.finish("first")  # the lease is handed to `second`, which has not run yet
    second.cancel()
    await settle()
    assert list(held.got) == ["first", "third"] and admission.chooser("ic").outstanding("a") == 1


async def test_a_copy_that_becomes_ready_takes_the_waiters() -> None:
    admission = Admission()
    held = Held(admission)
    for i in range(3):
        held.send(str(i), [copy("a"), copy("b", state=CopyState.STARTING)])
    await settle()
    assert list(held.got) == ["0"] and admission.waiting("ic") == 2
    held.send("3", [copy("a"), copy("b", 1)])  # a later request's snapshot has b ready: the oldest waiter gets it
    await settle()
    assert held.got == {"0": "a", "1": "b"} and admission.waiting("ic") == 2


async def test_nothing_to_wait_for_when_no_copy_outside_the_excluded_is_ready() -> None:
    admission = Admission()
    assert await admission.lease("ic", [copy("a")], exclude=["a"]) is None
    assert await admission.lease("ic", [copy("a", state=CopyState.FAILED)]) is None
    assert admission.waiting("ic") == 0


async def test_a_waiter_that_excludes_the_free_copy_keeps_its_place_and_others_pass() -> None:
    admission = Admission()
    held, copies = Held(admission), [copy("a"), copy("b")]
    held.send("on-a", copies)
    held.send("on-b", copies)
    await settle()
    held.send("not-a", copies, exclude=["a"])  # e.g. a retry after a refused
    held.send("any", copies)
    await settle()
    held.finish("on-a")
    await settle()
    assert held.got.get("any") == "a" and "not-a" not in held.got and admission.waiting("ic") == 1
    held.finish("on-b")
    await settle()
    assert held.got["not-a"] == "b"


async def test_copies_that_report_no_concurrency_take_the_default() -> None:
    admission = Admission(AdmissionLimits(default_concurrency=3))
    held, copies = Held(admission), [copy("a", None)]
    for i in range(4):
        held.send(str(i), copies)
    await settle()
    assert len(held.got) == 3 and admission.waiting("ic") == 1


async def test_components_are_independent() -> None:
    admission = Admission(AdmissionLimits(queue=0))
    a, b = Held(admission, "a"), Held(admission, "b")
    a.send("x", [copy("a1")])
    b.send("y", [copy("b1")])
    await settle()
    assert a.got == {"x": "a1"} and b.got == {"y": "b1"}


async def test_a_pinned_request_waits_for_its_copy_while_another_has_room() -> None:
    admission = Admission(AdmissionLimits(queue=10))
    copies = [copy("a", 1), copy("b", 1)]
    first = await admission.lease("ic", copies, route=RequestRouting(pin="a"))
    assert first is not None and first.copy.copy_id == "a"
    waiting = asyncio.create_task(admission.lease("ic", copies, route=RequestRouting(pin="a"), timeout_s=5))
    await settle()
    assert not waiting.done() and admission.waiting("ic") == 1  # b has room, but it is not its session's copy
    other = await admission.lease("ic", copies)  # an unpinned request behind it takes b
    assert other is not None and other.copy.copy_id == "b"
    first.release()
    second = await waiting
    assert second is not None and second.copy.copy_id == "a"


async def test_a_pinned_request_whose_copy_is_not_ready_gets_none() -> None:
    admission = Admission(AdmissionLimits(queue=10))
    copies = [copy("a", 1, state=CopyState.STARTING), copy("b", 1)]
    assert await admission.lease("ic", copies, route=RequestRouting(pin="a")) is None
