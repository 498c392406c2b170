"""Integers and decimals within bounds as GBNF, digit by digit: the grammar allows exactly the canonical JSON
spellings (no leading zeros, no "-0") of the integers in [low, high], either end open.

A range of same-length digit strings splits on its first digit: the low end's first digit followed by anything
at least the rest of low, the digits strictly between followed by any digits, the high end's first digit followed
by anything at most the rest of high. Ranges of different lengths are split by length first. Open ends stop at
`MAX_DIGITS` digits, as JSON parsers read larger integers as floats anyway.
"""

from __future__ import annotations

import math

MAX_DIGITS = 16
FRACTION = '"." [0-9]{1,15}'
NONZERO_FRACTION = '"." [0-9]{0,14} [1-9]'


def integer_range(low: int | None, high: int | None) -> str | None:
    """GBNF expression for the integers in [low, high] (None: open); None when there are none."""
    if low is not None and high is not None and low > high:
        return None
    parts = []
    if high is None or high >= 0:
        parts.append(naturals(max(low, 0) if low is not None else 0, high))
    if low is None or low < 0:
        least = 1 if high is None or high >= 0 else -high
        parts.append(f'"-" ({naturals(least, None if low is None else -low)})')
    return " | ".join(p for p in parts if p) or None


def decimal_range(minimum: float | None, maximum: float | None, *, exclusive_min: bool = False,
                  exclusive_max: bool = False) -> str | None:
    """GBNF expression for decimals (no exponent) within the bounds: the integers in range, and numbers with a
    fraction whose whole integer unit lies in range (so 2.x for [0, 3], not 2.x for [0, 2.5]): exact for integer
    bounds (up to 15 fraction digits), a subset otherwise. None when that subset is empty (a range narrower
    than one unit)."""
    low = _low_int(minimum, exclusive_min)
    high = _high_int(maximum, exclusive_max)
    parts = [integer_range(low, high)]
    # i.f lies in [i, i + 1): allowed when i is at or above the minimum (above, if exclusive) and i + 1 <= maximum
    frac_low = max(low, 0) if low is not None else 0
    frac_high = None if maximum is None else math.floor(maximum) - 1
    if frac_high is None or frac_low <= frac_high:
        parts.append(f"({naturals(frac_low, frac_high)}) {FRACTION}")
    # -k.f lies in (-(k + 1), -k]: allowed when -(k + 1) >= minimum and -k is within the maximum
    k_high = None if minimum is None else math.floor(-minimum) - 1
    k_low = 0 if maximum is None else max(0, math.floor(-maximum) + 1 if exclusive_max else math.ceil(-maximum))
    if k_high is None or k_low <= k_high:
        parts.append(f'"-" ({naturals(k_low, k_high)}) {FRACTION}')
    # at an exclusive integer bound, its own unit with a fraction that is not zero: 0.x for > 0, -0.x for < 0
    if exclusive_min and minimum is not None and float(minimum).is_integer() and minimum >= 0 and (
            maximum is None or minimum + 1 <= maximum):
        parts.append(f'"{int(minimum)}" {NONZERO_FRACTION}')
    if exclusive_max and maximum is not None and float(maximum).is_integer() and maximum <= 0 and (
            minimum is None or maximum - 1 >= minimum):
        parts.append(f'"-{-int(maximum)}" {NONZERO_FRACTION}')
    return " | ".join(f"({p})" for p in parts if p) or None


def _low_int(bound: float | None, exclusive: bool) -> int | None:
    if bound is None:
        return None
    return math.floor(bound) + 1 if exclusive else math.ceil(bound)


def _high_int(bound: float | None, exclusive: bool) -> int | None:
    if bound is None:
        return None
    return math.ceil(bound) - 1 if exclusive else math.floor(bound)


def naturals(low: int, high: int | None) -> str:
    """GBNF for the non-negative integers in [low, high] (high None: up to MAX_DIGITS digits), no leading zeros;
    "" when there are none."""
    if high is not None and low > high:
        return ""
    top = len(str(high)) if high is not None else max(len(str(low)), MAX_DIGITS)
    parts = []
    full: list[int] = []  # lengths of two digits or more whose every number is in range: one part for them all
    for length in range(len(str(low)), top + 1):
        first = 0 if length == 1 else 10 ** (length - 1)
        last = 10 ** length - 1
        lo, hi = max(low, first), last if high is None else min(high, last)
        if length > 1 and (lo, hi) == (first, last):
            full.append(length)
        elif lo <= hi:
            parts.append(between(str(lo), str(hi)))
    if full:
        counts = f"{full[0] - 1},{full[-1] - 1}" if len(full) > 1 else f"{full[0] - 1}"
        parts.append(f"[1-9] [0-9]{{{counts}}}")
    return " | ".join(parts)


def between(low: str, high: str) -> str:
    """GBNF for the digit strings of len(low) == len(high) from low to high (leading zeros allowed)."""
    n = len(low)
    if low == high:
        return f'"{low}"'
    if low == "0" * n and high == "9" * n:
        return f"[0-9]{{{n}}}" if n > 1 else "[0-9]"
    if n == 1:
        return f"[{low}-{high}]"
    if low[0] == high[0]:
        return f'"{low[0]}" ({between(low[1:], high[1:])})'
    rest = n - 1
    a, b = int(low[0]), int(high[0])
    parts = []
    if low[1:] != "0" * rest:  # low's first digit with only part of the rest
        parts.append(f'"{a}" ({between(low[1:], "9" * rest)})')
        a += 1
    if high[1:] != "9" * rest:
        tail = f'"{b}" ({between("0" * rest, high[1:])})'
        b -= 1
    else:
        tail = ""
    if a <= b:
        parts.append(f"{_digit(a, b)} [0-9]{{{rest}}}")
    if tail:
        parts.append(tail)
    return " | ".join(parts)


def _digit(a: int, b: int) -> str:
    return f'"{a}"' if a == b else f"[{a}-{b}]"
