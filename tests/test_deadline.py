"""The deadline a request is ended at, for a client that waits a given time."""

from __future__ import annotations

import pytest

from pier.deadline import Limit, StreamClock, before_client_gives_up


@pytest.mark.parametrize(
    ("timeout_s", "deadline_s"),
    [(60.0, 58.0), (300.0, 298.0), (10.0, 9.0), (5.0, 4.5), (1.0, 0.9)],
)
def test_a_little_before_the_client_gives_up(timeout_s: float, deadline_s: float) -> None:
    assert before_client_gives_up(timeout_s) == pytest.approx(deadline_s)


@pytest.mark.parametrize(
    ("arrived", "total_s", "due", "limit"),
    [
        ([], None, 100.0 + 2.0, Limit.FIRST_PART),  # nothing yet: the first part within idle_s of the start
        ([101.5], None, 103.5, Limit.SILENCE),  # each part moves it
        ([101.5, 103.0, 104.5, 106.0], None, 108.0, Limit.SILENCE),  # flowing past 2 s is never cut
        ([101.5, 103.0], 4.0, 104.0, Limit.TOTAL),  # the total bound comes first
        ([], 1.0, 101.0, Limit.TOTAL),
        ([101.0], 10.0, 103.0, Limit.SILENCE),
    ],
)
def test_a_streams_deadline_follows_its_parts(arrived: list[float], total_s: float | None, due: float,
                                               limit: Limit) -> None:
    clock = StreamClock(100.0, 2.0, total_s)
    for at in arrived:
        clock.moved(at)
    assert clock.due() == pytest.approx(due) and clock.limit() is limit
