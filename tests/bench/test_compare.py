"""The statistics of interleaved repeats: spread, the ratio of medians and paired ratios."""

from __future__ import annotations

import pytest

from pier.bench.compare import paired_ratios, ratio_of_medians, spread
from pier.bench.result import Spread


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([2.0], Spread(2.0, 2.0, 2.0)),
        ([3.0, 1.0, 2.0], Spread(2.0, 1.0, 3.0)),
        ([4.0, 1.0, 2.0, 3.0], Spread(2.5, 1.0, 4.0)),  # an even count: the mean of the middle two
    ],
)
def test_spread(values: list[float], expected: Spread) -> None:
    assert spread(values) == expected


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([2.0], [1.0], 2.0),
        ([1.0, 3.0, 2.0], [4.0, 4.0, 4.0], 0.5),
        ([10.0, 30.0], [5.0, 5.0, 20.0], 4.0),  # medians of each side's own repeats: 20 / 5
        ([1.0], [0.0], None),
        ([0.0, 0.0], [1.0, 1.0], 0.0),
    ],
)
def test_ratio_of_medians(a: list[float], b: list[float], expected: float | None) -> None:
    assert ratio_of_medians(a, b) == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([], [], []),
        ([2.0, 3.0], [1.0, 2.0], [2.0, 1.5]),
        ([1.0, 5.0, 2.0], [2.0, 0.0, 4.0], [0.5, 0.5]),  # a pair whose b is 0 has no ratio
        # per pair, not of medians: the medians (2 / 2) hide that a beat b in one pair only
        ([3.0, 2.0, 1.0], [1.0, 2.0, 3.0], [3.0, 1.0, 1 / 3]),
    ],
)
def test_paired_ratios(a: list[float], b: list[float], expected: list[float]) -> None:
    assert paired_ratios(a, b) == pytest.approx(expected)


def test_paired_ratios_need_pairs() -> None:
    with pytest.raises(ValueError):
        paired_ratios([1.0, 2.0], [1.0])
