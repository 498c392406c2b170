"""Integer and decimal ranges as grammars, checked exhaustively: every integer (and quarter) in a window around
the bounds is taken by llama.cpp's grammar sampler exactly when it lies in the range, in canonical spelling."""

from __future__ import annotations

import pytest

from pier.engine.int_range import between, decimal_range, integer_range, naturals

from .conftest import grammar_accepts

WINDOW = range(-260, 261)


@pytest.mark.parametrize(("low", "high"), [
    (None, None), (0, None), (None, 0), (18, 130), (-20, -3), (-7, 12), (5, 5), (1, 1000), (99, 101), (None, -100),
    (-1, None), (123, None), (0, 9), (10, 99), (-255, 255), (100, 199),
])
def test_integers_in_range_and_nothing_else(low: int | None, high: int | None) -> None:
    expression = integer_range(low, high)
    assert expression is not None
    taken = grammar_accepts(f"root ::= {expression}", *(str(n) for n in WINDOW))
    assert taken == [(low is None or n >= low) and (high is None or n <= high) for n in WINDOW]


def test_no_leading_zeros_no_minus_zero_and_open_ends_stop_at_16_digits() -> None:
    grammar = f"root ::= {integer_range(None, None)}"
    assert grammar_accepts(grammar, "007", "-0", "+1", "9" * 16, "9" * 17) == [False, False, False, True, False]


def test_an_empty_range_has_no_grammar() -> None:
    assert integer_range(3, 2) is None
    assert naturals(5, 4) == ""


@pytest.mark.parametrize(("low", "high", "expression"), [
    ("0", "9", "[0-9]"), ("00", "99", "[0-9]{2}"), ("3", "3", '"3"'), ("10", "19", '"1" ([0-9])'),
    ("18", "42", '"1" ([8-9]) | [2-3] [0-9]{1} | "4" ([0-2])'),
])
def test_same_length_ranges_split_on_the_first_digit(low: str, high: str, expression: str) -> None:
    assert between(low, high) == expression


QUARTERS = [n / 4 for n in range(-60, 61)]


def _spelled(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


@pytest.mark.parametrize(("minimum", "maximum", "exclusive_min", "exclusive_max"), [
    (0, 1, False, False), (-2, 3, False, False), (0, 10, True, True), (-3, None, False, False),
    (None, 2, False, True), (-1, 0, False, True), (None, None, False, False), (5, 5, False, False),
])
def test_decimals_with_integer_bounds_are_exact(minimum: int | None, maximum: int | None, exclusive_min: bool,
                                                exclusive_max: bool) -> None:
    expression = decimal_range(minimum, maximum, exclusive_min=exclusive_min, exclusive_max=exclusive_max)
    assert expression is not None
    taken = grammar_accepts(f"root ::= {expression}", *(_spelled(q) for q in QUARTERS))
    assert taken == [(minimum is None or (q > minimum if exclusive_min else q >= minimum))
                     and (maximum is None or (q < maximum if exclusive_max else q <= maximum)) for q in QUARTERS]


@pytest.mark.parametrize(("minimum", "maximum"), [(-1.5, 2.5), (0.1, 7.9), (-3.25, -0.5)])
def test_decimals_with_fractional_bounds_stay_inside_them(minimum: float, maximum: float) -> None:
    expression = decimal_range(minimum, maximum)
    assert expression is not None
    taken = grammar_accepts(f"root ::= {expression}", *(_spelled(q) for q in QUARTERS))
    assert all(minimum <= q <= maximum for q, ok in zip(QUARTERS, taken, strict=True) if ok)
    assert any(taken)


def test_a_range_narrower_than_one_unit_has_no_grammar() -> None:
    assert decimal_range(0.25, 0.5) is None
