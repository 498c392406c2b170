"""How far two token sequences agree from the start: what the prefix cache and the retention budget measure."""

from __future__ import annotations

from collections.abc import Sequence


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the longest common prefix of a and b, at most `limit`. Slice compares run in C."""
    n = min(len(a), len(b), limit)
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
