"""The concurrency limit."""

from __future__ import annotations

import pytest

from pier.errors import Overloaded
from pier.server.copy_admission import CopyAdmission


def test_refuses_past_the_limit_and_releases_once() -> None:
    admission = CopyAdmission(2)
    first, second = admission.enter(), admission.enter()
    with pytest.raises(Overloaded, match="MAX_CONCURRENT_REQUESTS"):
        admission.enter()
    first.release()
    first.release()
    assert admission.in_flight == 1
    with admission.enter():
        assert admission.in_flight == 2
    assert admission.in_flight == 1
    second.release()
    assert admission.in_flight == 0


def test_hand_off_moves_the_turn_out_of_the_block() -> None:
    admission = CopyAdmission(1)
    with admission.enter() as ticket:
        stream_ticket = ticket.hand_off()
    assert admission.in_flight == 1
    stream_ticket.release()
    assert admission.in_flight == 0
