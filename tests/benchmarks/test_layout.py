"""The layout benchmark's pure parts: the best req/s among levels that met the TTFT p99 target, and --layouts."""

from __future__ import annotations

import pytest
from layout import Layout, best_meeting, parse_layouts


@pytest.mark.parametrize(
    ("rows", "target", "expected"),
    [
        ({}, 2.0, None),
        ({16: (5.0, 2.5)}, 2.0, None),  # the only level missed the target
        ({16: (5.0, 1.0), 32: (7.0, 1.9), 64: (8.0, 3.0)}, 2.0, 7.0),  # the busiest level missed: the next one
        ({16: (5.0, 2.0)}, 2.0, 5.0),  # on the target counts as met
        ({16: (6.0, 0.5), 32: (4.0, 0.9)}, 2.0, 6.0),  # more users, fewer req/s: the best, not the busiest
    ],
)
def test_best_meeting(rows: dict[int, tuple[float, float]], target: float, expected: float | None) -> None:
    assert best_meeting(rows, target) == expected


def test_parse_layouts() -> None:
    assert parse_layouts("4x4, 2x8") == [Layout(4, 4), Layout(2, 8)]
    assert parse_layouts("4x4")[0].label == "pier 4x4"
    with pytest.raises(SystemExit, match="COPIESxTHREADS"):
        parse_layouts("4by4")
