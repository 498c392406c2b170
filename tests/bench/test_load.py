from __future__ import annotations

import asyncio
import random
import time

import pytest

from pier.bench.conversations import Conversations, Prompt
from pier.bench.load import Budget, LoadRun, closed_loop, open_loop, scheduled_loop
from pier.bench.options import BenchOptions
from pier.bench.request_record import RequestRecord
from pier.bench.vocabulary import TokenPool

POOL = TokenPool("words", words=("a", "b"), source="test")


class FakeServer:
    """Answers after `seconds`, counting how many requests are in flight at once."""

    def __init__(self, seconds: float = 0.01, fail_round: int | None = None) -> None:
        self.seconds = seconds
        self.fail_round = fail_round
        self.in_flight = 0
        self.most_in_flight = 0
        self.prompts: list[Prompt] = []

    async def send(self, prompt: Prompt, record: RequestRecord) -> RequestRecord:
        self.prompts.append(prompt)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(self.seconds)
        self.in_flight -= 1
        if record.round == self.fail_round:
            record.fail("500", "boom")
        else:
            record.token_times, record.text, record.output_tokens = [self.seconds], f" reply{record.round}", 1
        return record


def session(server: FakeServer, budget: Budget, **fields: object) -> LoadRun:
    options = BenchOptions(target="http://h", input_len=2, **fields)  # type: ignore[arg-type]
    return LoadRun(Conversations(options, POOL, "seed").conversations(), server.send, budget, lambda r: None)


@pytest.mark.parametrize(("users", "limit"), [(1, 3), (4, 10), (8, 5)])
def test_closed_loop_sends_exactly_the_limit_with_at_most_users_in_flight(users: int, limit: int) -> None:
    server = FakeServer()
    s = session(server, Budget.of(limit, None))
    asyncio.run(closed_loop(s, users))
    assert len(s.records) == limit == len(server.prompts)
    assert server.most_in_flight == min(users, limit)
    assert [r.index for r in s.records] == list(range(limit))


def test_closed_loop_stops_starting_at_the_deadline() -> None:
    server = FakeServer(seconds=0.02)
    s = session(server, Budget.of(None, 0.2))
    started = time.perf_counter()
    asyncio.run(closed_loop(s, 2))
    elapsed = time.perf_counter() - started
    assert 0.2 <= elapsed < 0.2 + 0.2
    assert 10 <= len(s.records) <= 22


def test_open_loop_arrivals_do_not_wait_for_answers() -> None:
    server = FakeServer(seconds=0.3)
    s = session(server, Budget.of(8, None))
    started = time.perf_counter()
    asyncio.run(open_loop(s, rate=200.0, rng=random.Random(1)))
    assert len(s.records) == 8
    assert server.most_in_flight >= 4  # a closed loop of one would have had 1
    assert time.perf_counter() - started < 0.3 * 3


def test_open_loop_mean_gap_follows_the_rate() -> None:
    server = FakeServer(seconds=0.0)
    s = session(server, Budget.of(None, 0.5))
    asyncio.run(open_loop(s, rate=100.0, rng=random.Random(7)))
    assert 25 <= len(s.records) <= 80  # ~50 expected; Poisson spread plus timer slack


def test_multi_turn_sends_turns_in_order_with_replies() -> None:
    server = FakeServer()
    s = session(server, Budget.of(6, None), workload="multi-turn", turns=3)
    asyncio.run(closed_loop(s, 1))
    assert [(r.conversation, r.round) for r in s.records] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert [e.reply for e in server.prompts[2].history] == [" reply0", " reply1"]


def test_a_failed_round_ends_its_conversation() -> None:
    server = FakeServer(fail_round=1)
    s = session(server, Budget.of(4, None), workload="multi-turn", turns=3)
    asyncio.run(closed_loop(s, 1))
    assert [(r.conversation, r.round, r.ok) for r in s.records] == [
        (0, 0, True),
        (0, 1, False),
        (1, 0, True),
        (1, 1, False),
    ]


def test_a_rate_schedule_runs_each_segment_at_its_rate_one_after_another() -> None:
    server = FakeServer(seconds=0.01)
    s = session(server, Budget.of(None, None))
    started = time.perf_counter()
    asyncio.run(scheduled_loop(s, [(20.0, 0.5), (200.0, 0.5), (20.0, 0.5)], random.Random(1)))
    elapsed = time.perf_counter() - started
    assert 1.4 <= elapsed < 3.0
    assert len(s.records) == len(server.prompts) > 0
    # The busy middle segment sends several times what the quiet ones do.
    assert len(s.records) >= 40, len(s.records)
