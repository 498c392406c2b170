"""Drafts read off a sequence's own history (n-gram speculation): what is proposed, and the back-off."""

from __future__ import annotations

import pytest

from pier.engine.draft import BACKOFF_LIMIT, Drafter


@pytest.mark.parametrize(("history", "most", "draft"), [
    ([1, 2, 3, 4, 1, 2], 4, [3, 4, 1, 2]),  # "1 2" came before: what followed it
    ([1, 2, 3, 4, 1, 2], 2, [3, 4]),  # at most `most`
    ([1, 2, 3, 9, 2, 3], 4, [9, 2, 3]),  # up to the end of the history
    ([1, 2, 7, 1, 2, 8, 1, 2], 3, [8, 1, 2]),  # the latest earlier occurrence
    ([4, 1, 2, 7, 3, 1, 2, 8, 4, 1, 2], 3, [7, 3, 1]),  # ... unless a longer n-gram ("4 1 2") matches elsewhere
    ([1, 2, 3, 4, 5, 6], 4, []),  # nothing repeats
    ([1, 2, 3, 1], 4, []),  # one token is not enough to draft from
    ([7, 7, 7], 3, [7]),  # a run: "7 7" ended at 2, followed by 7
    ([1, 2, 1, 2], 0, []),
    ([], 4, []),
])
def test_proposal(history: list[int], most: int, draft: list[int]) -> None:
    assert Drafter().propose(history, most) == draft


def test_the_index_grows_with_the_history() -> None:
    drafter, history = Drafter(), [1, 2, 3]
    assert drafter.propose(history, 4) == []
    history += [4, 1, 2]
    assert drafter.propose(history, 4) == [3, 4, 1, 2]
    history += [3, 9, 1, 2]
    assert drafter.propose(history, 4) == [3, 9, 1, 2]


def test_rejected_drafts_back_off_and_a_kept_one_resets() -> None:
    drafter, history = Drafter(), [1, 2, 3, 1, 2]

    def steps_until_a_draft() -> int:
        skipped = 0
        while not drafter.propose(history, 2):
            skipped += 1
        return skipped

    waits = []
    for _ in range(7):
        waits.append(steps_until_a_draft())
        drafter.judge(2, 0)
    assert waits == [0, 1, 2, 4, 8, BACKOFF_LIMIT, BACKOFF_LIMIT]
    steps_until_a_draft()
    drafter.judge(2, 1)  # kept: the next rejection waits one step again
    assert steps_until_a_draft() == 0
    drafter.judge(2, 0)
    assert steps_until_a_draft() == 1
