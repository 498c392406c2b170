"""What one attempt of a request on a copy came to (pier.runtime.attempts.attempt.classify), case by case (pure)."""

from __future__ import annotations

import pytest

from pier.runtime.attempts.attempt import CUT, NOT_REACHED, Fate, Outcome, Reply, Situation, classify, fate
from pier.runtime.settings import ResumeSettings

OPENING = Situation()  # no copy answered in frames yet
OTHERS = Situation(others=True)
KNOWN = Situation(known=True)  # the copy answered in frames before
FRAMED = Situation(framed=True)  # a copy answered in frames: the request goes on in frames
RESUMED = Situation(framed=True, resumed=True)
HEADED = Situation(framed=True, headed=True)
FRAMED_OTHERS = Situation(framed=True, others=True)


def head(status: int, refused: bool = False) -> Reply:
    return Reply(status, refused=refused, in_frames=True)


CASES = [
    # no answer
    ("no connection", NOT_REACHED, OPENING, Outcome.UNREACHABLE),
    ("no connection, framed", NOT_REACHED, FRAMED, Outcome.UNREACHABLE),
    ("broke before answering", CUT, OPENING, Outcome.BROKEN),
    ("broke before answering, with other copies", CUT, OTHERS, Outcome.BROKEN),
    ("a copy known to resume broke before answering", CUT, KNOWN, Outcome.UNREACHABLE),
    ("broke before answering a continuation", CUT, FRAMED, Outcome.UNREACHABLE),
    # plain answers, opening
    ("ok", Reply(200), OPENING, Outcome.ANSWERED),
    ("a copy's error", Reply(500), OTHERS, Outcome.ANSWERED),
    ("full", Reply(429), OPENING, Outcome.THROTTLED),
    ("full, with the refusal header", Reply(429, refused=True), OTHERS, Outcome.THROTTLED),
    ("refused, another copy", Reply(503, refused=True), OTHERS, Outcome.REFUSED),
    ("refused, the last copy: its answer", Reply(503, refused=True), OPENING, Outcome.ANSWERED),
    ("in frames", Reply(200, framed=True), OPENING, Outcome.FRAMED),
    # plain answers to a framed request
    ("a continuation in frames", Reply(200, framed=True), RESUMED, Outcome.FRAMED),
    ("full, framed", Reply(429), RESUMED, Outcome.THROTTLED),
    ("plain to a continuation", Reply(200), RESUMED, Outcome.STRANDED),
    ("plain refusal to a continuation", Reply(503, refused=True), FRAMED_OTHERS, Outcome.STRANDED),
    # heads in frames
    ("the first head", head(200), FRAMED, Outcome.ANSWERED),
    ("the first head, an error", head(400), FRAMED, Outcome.ANSWERED),
    ("head refused, another copy", head(503, refused=True), FRAMED_OTHERS, Outcome.REFUSED),
    ("head refused, the last copy: its answer", head(503, refused=True), FRAMED, Outcome.ANSWERED),
    ("full, the last copy: its answer", head(429, refused=True), FRAMED, Outcome.ANSWERED),
    ("refused after a copy died: wait", head(429, refused=True), RESUMED, Outcome.REFUSED),
    ("refused once headed: wait", head(503, refused=True), HEADED, Outcome.REFUSED),
    ("a continuation's head", head(200), HEADED, Outcome.CONTINUED),
    ("a continuation's error", head(500), HEADED, Outcome.FAILED),
    ("the head after a copy died before its own", head(200), RESUMED, Outcome.ANSWERED),
]


@pytest.mark.parametrize(("reply", "now", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(reply: Reply, now: Situation, expected: Outcome) -> None:
    assert classify(reply, now) is expected


BOUNDS = ResumeSettings(attempts=3, poison_copies=2)


@pytest.mark.parametrize(("deaths", "resumes", "stopping", "expected"), [
    (1, 0, False, Fate.RESUMED),
    (1, 2, False, Fate.RESUMED),  # the third resume is still within `attempts`
    (2, 1, False, Fate.CONDEMNED),
    (3, 3, False, Fate.CONDEMNED),  # taking copies down weighs more than running out of resumes
    (1, 3, False, Fate.EXHAUSTED),
    (2, 1, True, Fate.STOPPED),  # the gateway's drain ends it whatever else holds
])
def test_fate_of_a_request_whose_copy_died(deaths: int, resumes: int, stopping: bool, expected: Fate) -> None:
    assert fate(deaths, resumes, BOUNDS, stopping=stopping) is expected


def test_resuming_turned_off_gives_up_at_the_first_death() -> None:
    assert fate(1, 0, ResumeSettings(attempts=0), stopping=False) is Fate.EXHAUSTED
