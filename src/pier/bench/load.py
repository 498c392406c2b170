"""How load is applied: closed-loop users (each sends its next request when the last one is answered) or an
open-loop Poisson process (requests arrive at random at a mean rate, whatever the server's pace). Both stop
by themselves: after a number of requests or at a deadline, whichever comes first; requests already sent are
then waited for (each is bounded by the client's timeout).

A conversation's rounds always go one after another, each carrying the previous replies; a failed round ends
its conversation. Under open loop the arrivals are conversations (single requests for one-round workloads).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass

from pier.bench.conversations import Conversation, Exchange, Prompt
from pier.bench.request_record import RequestRecord

Send = Callable[[Prompt, RequestRecord], Awaitable[RequestRecord]]
Observer = Callable[[RequestRecord], None]


@dataclass
class Budget:
    """How many more requests may start, and until when (a time.perf_counter() value)."""

    limit: int | None
    deadline: float | None
    started: int = 0

    @classmethod
    def of(cls, limit: int | None, duration_s: float | None) -> Budget:
        return cls(limit, None if duration_s is None else time.perf_counter() + duration_s)

    @property
    def exhausted(self) -> bool:
        out_of_requests = self.limit is not None and self.started >= self.limit
        out_of_time = self.deadline is not None and time.perf_counter() >= self.deadline
        return out_of_requests or out_of_time

    def take(self) -> bool:
        if self.exhausted:
            return False
        self.started += 1
        return True


class LoadRun:
    """One run's traffic: where conversations come from, how they are sent, and every request's record."""

    def __init__(self, conversations: Iterator[Conversation], send: Send, budget: Budget, observe: Observer) -> None:
        self.conversations = conversations
        self.send = send
        self.budget = budget
        self.observe = observe
        self.records: list[RequestRecord] = []

    async def converse(self, conversation: Conversation) -> None:
        """Send a conversation round by round. The caller took its first request from the budget already, so
        that a task not yet running is never counted twice."""
        history: tuple[Exchange, ...] = ()
        for number in range(len(conversation.rounds)):
            if number and not self.budget.take():
                return
            record = RequestRecord(index=len(self.records), conversation=conversation.index, round=number)
            self.records.append(record)
            prompt = conversation.prompt(number, history)
            await self.send(prompt, record)
            self.observe(record)
            if not record.ok:
                return
            history = (*history, Exchange(prompt.user, record.text))


async def closed_loop(session: LoadRun, users: int) -> None:
    async def user() -> None:
        while session.budget.take():
            await session.converse(next(session.conversations))

    await asyncio.gather(*(user() for _ in range(users)))


async def open_loop(session: LoadRun, rate: float, rng: random.Random) -> None:
    """Poisson arrivals: exponential gaps with mean 1/rate, the first at once (as vLLM's benchmark does)."""
    started: set[asyncio.Task[None]] = set()
    while session.budget.take():
        task = asyncio.create_task(session.converse(next(session.conversations)))
        started.add(task)
        task.add_done_callback(started.discard)
        if session.budget.exhausted:
            break
        await asyncio.sleep(rng.expovariate(rate))
    await asyncio.gather(*started)


async def scheduled_loop(session: LoadRun, schedule: Sequence[tuple[float, float]], rng: random.Random) -> None:
    """Poisson arrivals at each segment's rate for its seconds, one segment after another (rate 0: a pause); the
    first arrival of each segment at once. Requests still running when a segment ends go on into the next."""
    started: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    for rate, seconds in schedule:
        ends = loop.time() + seconds
        if rate == 0:  # a pause: nothing arrives
            await asyncio.sleep(seconds)
            continue
        while loop.time() < ends and session.budget.take():
            task = asyncio.create_task(session.converse(next(session.conversations)))
            started.add(task)
            task.add_done_callback(started.discard)
            await asyncio.sleep(min(rng.expovariate(rate), max(0.0, ends - loop.time())))
    await asyncio.gather(*started)
