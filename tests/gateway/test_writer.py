"""The gateway's writer: work runs off the loop, one call at a time in the order given, and wake-ups made there
come back to the loop's thread."""

from __future__ import annotations

import asyncio
import threading
import time

from pier.gateway.writer import Writer


def test_work_runs_off_the_loop_in_order_while_the_loop_keeps_running() -> None:
    writer = Writer()
    done: list[int] = []
    threads: set[int] = set()

    def work(n: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.05)  # blocking, as SQLite is
        done.append(n)
        return n * n

    async def main() -> tuple[list[int], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        answers = await asyncio.gather(*(writer.run(work, n) for n in range(6)))
        ticking.cancel()
        return list(answers), ticks

    answers, ticks = asyncio.run(main())
    writer.close()
    assert answers == [n * n for n in range(6)] and done == list(range(6))
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert ticks > 20  # the loop ran all through 0.3 s of blocking work


def test_soon_hands_a_wake_up_made_on_the_writer_back_to_the_loop() -> None:
    writer = Writer()
    seen: list[tuple[str, int]] = []

    async def main() -> int:
        loop_thread = threading.get_ident()
        event = asyncio.Event()

        def wake() -> None:
            seen.append(("woken", threading.get_ident()))
            event.set()

        await writer.run(writer.soon(wake))  # called on the writer thread
        await asyncio.wait_for(event.wait(), 2)
        writer.soon(lambda: seen.append(("direct", threading.get_ident())))()  # on the loop: at once
        return loop_thread

    loop_thread = asyncio.run(main())
    writer.close()
    assert seen == [("woken", loop_thread), ("direct", loop_thread)]
