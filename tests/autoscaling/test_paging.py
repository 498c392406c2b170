"""NextToken names the last row of its page: the next page starts after it whatever changed in between."""

from __future__ import annotations

import pytest

from pier.autoscaling.errors import ScalingValidation
from pier.autoscaling.paging import page, size_of


def rows(*places: int) -> list[tuple[list[int], dict[str, int]]]:
    return [([p], {"n": p}) for p in places]


def test_the_next_page_starts_after_the_last_row_shown_even_when_rows_go_or_come() -> None:
    first = page(rows(1, 2, 3, 4), "Rows", 2, None, ScalingValidation)
    assert first["Rows"] == [{"n": 1}, {"n": 2}]
    second = page(rows(2, 3, 4, 5), "Rows", 2, first["NextToken"], ScalingValidation)  # 1 went, 5 came
    assert second["Rows"] == [{"n": 3}, {"n": 4}] and "NextToken" in second
    last = page(rows(2, 3, 4, 5), "Rows", 2, second["NextToken"], ScalingValidation)
    assert last == {"Rows": [{"n": 5}]}


def test_a_token_that_is_not_one_of_pier_is_refused_with_how_to_fix() -> None:
    for token in ("-1", "zzz", "bnVsbA=="):
        with pytest.raises(ScalingValidation, match="previous answer"):
            page(rows(1), "Rows", 1, token, ScalingValidation)
    with pytest.raises(ScalingValidation, match="between 1 and 50"):
        size_of({"MaxResults": 0}, "MaxResults", 50, 50, ScalingValidation)
    assert size_of({}, "MaxResults", 10, 10, ScalingValidation) == 10
