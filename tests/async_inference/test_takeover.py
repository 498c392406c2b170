"""The rules a new leader's dispatcher follows with each request it finds (issue 40: answered exactly once whichever
gateway dies). What it does with a row in each state, on SQLite and PostgreSQL, is
tests/async_inference/test_dispatcher.py's table."""

from __future__ import annotations

import pytest

from pier.async_inference.takeover import FOUND, RUN, before_running


@pytest.mark.parametrize(("ran", "owner", "then"), [
    (False, None, RUN),  # never ran: nothing to look for
    (False, "a", RUN),  # never ran, yet an object written for its id: not looked for (a first run writes it)
    (True, None, RUN),  # ran, nothing written: it runs again
    (True, "b", RUN),  # ran, another request's answer at its Filename: it runs and replaces it
    (True, "a", FOUND),  # ran and its answer was written before its leader died: not run again
])
def test_a_request_that_ran_before_is_looked_for_first(ran: bool, owner: str | None, then: str) -> None:
    assert before_running("a", ran, owner) == then
