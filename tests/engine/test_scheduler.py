import pytest

from pier.engine.scheduler import Work, plan


@pytest.mark.parametrize(
    ("pending", "budget", "expected"),
    [
        ([], 8, []),
        ([1, 1, 1], 8, [Work(0, 1), Work(1, 1), Work(2, 1)]),
        # decodes go first, then prompt chunks in admission order
        ([10, 1, 1], 8, [Work(1, 1), Work(2, 1), Work(0, 6)]),
        ([3, 10], 8, [Work(0, 3), Work(1, 5)]),
        # a long prompt never starves the running sequences
        ([1000, 1, 1, 1], 4, [Work(1, 1), Work(2, 1), Work(3, 1), Work(0, 1)]),
        # a later prompt waits when the budget is spent
        ([1, 1, 9, 5], 4, [Work(0, 1), Work(1, 1), Work(2, 2)]),
    ],
)
def test_plan(pending: list[int], budget: int, expected: list[Work]) -> None:
    assert plan(pending, budget) == expected
