"""Which candidates go on (pure)."""

from __future__ import annotations

import pytest

from pier.tune.halving import Standing, rank, survivors, within_noise


def s(key: str, goodputs: tuple[float, ...], throughputs: tuple[float, ...] | None = None) -> Standing:
    return Standing(key, goodputs, throughputs or goodputs)


@pytest.mark.parametrize(
    ("standings", "kept"),
    [
        ([], []),
        ([s("a", (10,))], ["a"]),
        ([s("a", (10,)), s("b", (20,)), s("c", (30,)), s("d", (40,))], ["d", "c"]),  # the better half
        ([s("a", (10,)), s("b", (20,)), s("c", (30,))], ["c", "b"]),  # rounded up
        ([s("a", (10, 29)), s("b", (20, 20)), s("c", (30, 30)), s("d", (40, 40))], ["d", "c"]),  # a's best < 30
        ([s("a", (10, 31)), s("b", (20, 20)), s("c", (30, 30)), s("d", (40, 40))], ["d", "c", "a"]),  # in the noise
        ([s("a", (0,), (50,)), s("b", (5,)), s("c", (0,), (60,))], ["b"]),  # SLO misses go once one meets it
        ([s("a", (0,), (50,)), s("b", (0,), (70,)), s("c", (0,), (60,))], ["b", "c"]),  # none met: throughput
    ],
)
def test_survivors(standings: list[Standing], kept: list[str]) -> None:
    assert survivors(standings) == kept


def test_rank_by_median_goodput_then_throughput() -> None:
    ranked = rank([s("a", (10, 10, 90)), s("b", (20, 20, 0)), s("c", (0,), (99,)), s("d", (0,), (98,))])
    assert [x.key for x in ranked] == ["b", "a", "c", "d"]


@pytest.mark.parametrize(
    ("first", "second", "noisy"),
    [((30, 32), (25, 29), False), ((30, 32), (25, 30), True), ((30,), (), False)],
)
def test_within_noise(first: tuple[float, ...], second: tuple[float, ...], noisy: bool) -> None:
    assert within_noise(s("a", first), s("b", second)) is noisy
