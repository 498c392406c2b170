"""The deadline a request is ended at, for a client that waits a given time."""

from __future__ import annotations

import pytest

from pier.deadline import before_client_gives_up


@pytest.mark.parametrize(
    ("timeout_s", "deadline_s"),
    [(60.0, 58.0), (300.0, 298.0), (10.0, 9.0), (5.0, 4.5), (1.0, 0.9)],
)
def test_a_little_before_the_client_gives_up(timeout_s: float, deadline_s: float) -> None:
    assert before_client_gives_up(timeout_s) == pytest.approx(deadline_s)
