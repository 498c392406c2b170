import random

import pytest

from pier.engine.scheduler import Work, plan


@pytest.mark.parametrize(
    ("pending", "budget", "expected"),
    [
        ([], 8, []),
        ([1, 1, 1], 8, [Work(0, 1), Work(1, 1), Work(2, 1)]),
        # decodes go first, then prompts
        ([10, 1, 1], 8, [Work(1, 1), Work(2, 1), Work(0, 6)]),
        ([3, 10], 8, [Work(0, 3), Work(1, 5)]),
        # a long prompt never starves the running sequences
        ([1000, 1, 1, 1], 4, [Work(1, 1), Work(2, 1), Work(3, 1), Work(0, 1)]),
        # the oldest prompt takes up to half the budget; a short prompt behind it is computed in the same step
        ([1000, 50], 512, [Work(0, 462), Work(1, 50)]),
        ([1000, 50, 1], 512, [Work(2, 1), Work(0, 461), Work(1, 50)]),
        # shortest first after the oldest's half, then the rest in that order
        ([1000, 300, 20, 100], 512, [Work(0, 256), Work(1, 136), Work(2, 20), Work(3, 100)]),
        # a short oldest prompt leaves the rest of its half to the others
        ([10, 600, 400], 512, [Work(0, 10), Work(1, 102), Work(2, 400)]),
        # prompts that do not fit wait for a later step
        ([1, 1, 9, 5], 4, [Work(0, 1), Work(1, 1), Work(2, 1), Work(3, 1)]),
        ([1, 1, 1, 9], 3, [Work(0, 1), Work(1, 1), Work(2, 1)]),
    ],
)
def test_plan(pending: list[int], budget: int, expected: list[Work]) -> None:
    assert plan(pending, budget) == expected


def test_every_prompt_advances_and_the_oldest_always_does() -> None:
    """Prompts of random lengths arriving every step: the oldest one advances each step (nothing starves), and
    the budget is spent whenever there is work for it."""
    rng = random.Random(0)
    pending: list[int] = []
    for _ in range(500):
        pending.append(rng.choice([1, 20, 80, 1500]))
        work = plan(pending, 512)
        assert sum(w.n_tokens for w in work) == min(512, sum(pending))
        prompts = [i for i, n in enumerate(pending) if n > 1]
        if prompts:
            assert any(w.index == prompts[0] for w in work)
        for w in work:
            pending[w.index] -= w.n_tokens
        pending = [n for n in pending if n > 0]
