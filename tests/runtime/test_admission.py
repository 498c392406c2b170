from __future__ import annotations

import asyncio

import pytest

from pier.runtime.admission import Admission, AdmissionLimits
from pier.runtime.errors import Throttled

pytestmark = pytest.mark.anyio


async def hold(admission: Admission, component: str, limit: int, entered: list[str], name: str,
               release: asyncio.Event, timeout_s: float | None = None) -> None:
    async with admission.turn(component, limit, timeout_s):
        entered.append(name)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_up_to_the_limit_enter_at_once_then_fifo() -> None:
    admission, entered, release = Admission(AdmissionLimits(queue=10)), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(admission, "ic", 2, entered, str(i), release)) for i in range(5)]
    await settle()
    assert entered == ["0", "1"] and admission.in_use("ic") == 2 and admission.waiting("ic") == 3
    release.set()
    await asyncio.gather(*tasks)
    assert entered == ["0", "1", "2", "3", "4"]
    assert admission.in_use("ic") == 0 and admission.waiting("ic") == 0 and not admission._gates


@pytest.mark.parametrize(
    ("limit", "queue", "admitted", "refused"), [(1, 0, 1, 3), (1, 2, 3, 1), (2, 1, 3, 1), (4, 0, 4, 0)]
)
async def test_a_full_queue_refuses_at_once(limit: int, queue: int, admitted: int, refused: int) -> None:
    admission, entered, release = Admission(AdmissionLimits(queue=queue)), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(admission, "ic", limit, entered, str(i), release)) for i in range(4)]
    await settle()
    failed = [t for t in tasks if t.done() and isinstance(t.exception(), Throttled)]
    assert len(failed) == refused
    release.set()
    await asyncio.gather(*(t for t in tasks if t not in failed))
    assert len(entered) == admitted
    assert all("is busy" in str(t.exception()) for t in failed)


async def test_waiting_is_bounded_by_the_timeout() -> None:
    admission, entered, release = Admission(), [], asyncio.Event()
    first = asyncio.create_task(hold(admission, "ic", 1, entered, "first", release))
    await settle()
    with pytest.raises(Throttled, match=r"no turn freed up within 0\.1 s"):
        await hold(admission, "ic", 1, entered, "late", release, timeout_s=0.05 * 2)
    assert admission.waiting("ic") == 0
    release.set()
    await first
    assert entered == ["first"]


async def test_a_cancelled_waiter_leaves_the_queue_and_its_turn_passes_on() -> None:
    admission, entered, release = Admission(), [], asyncio.Event()
    first = asyncio.create_task(hold(admission, "ic", 1, entered, "first", release))
    gone = asyncio.create_task(hold(admission, "ic", 1, entered, "gone", release))
    last = asyncio.create_task(hold(admission, "ic", 1, entered, "last", release))
    await settle()
    gone.cancel()
    await settle()
    assert admission.waiting("ic") == 1
    release.set()
    await asyncio.gather(first, last)
    assert entered == ["first", "last"] and admission.in_use("ic") == 0


async def test_a_waiter_cancelled_just_as_its_turn_is_handed_over_gives_it_back() -> None:
    admission, entered = Admission(), []
    release_first, release_rest = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(hold(admission, "ic", 1, entered, "first", release_first))
    second = asyncio.create_task(hold(admission, "ic", 1, entered, "second", release_rest))
    third = asyncio.create_task(hold(admission, "ic", 1, entered, "third", release_rest))
    await settle()
    release_first.set()
    await first  # the turn is handed to `second`, which has not run yet
    second.cancel()
    release_rest.set()
    await asyncio.gather(second, third, return_exceptions=True)
    assert entered == ["first", "third"] and admission.in_use("ic") == 0


async def test_a_higher_limit_lets_waiters_in() -> None:
    admission, entered, release = Admission(), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(admission, "ic", 1, entered, str(i), release)) for i in range(3)]
    await settle()
    assert entered == ["0"]
    tasks.append(asyncio.create_task(hold(admission, "ic", 3, entered, "3", release)))  # a copy became ready
    await settle()
    assert entered == ["0", "1", "2"] and admission.waiting("ic") == 1
    release.set()
    await asyncio.gather(*tasks)


async def test_components_are_independent() -> None:
    admission, entered, release = Admission(AdmissionLimits(queue=0)), [], asyncio.Event()
    tasks = [asyncio.create_task(hold(admission, name, 1, entered, name, release)) for name in ("a", "b")]
    await settle()
    assert sorted(entered) == ["a", "b"]
    release.set()
    await asyncio.gather(*tasks)


async def test_an_error_inside_the_block_frees_the_turn() -> None:
    admission = Admission()
    with pytest.raises(ValueError, match="boom"):
        async with admission.turn("ic", 1):
            raise ValueError("boom")
    assert admission.in_use("ic") == 0
