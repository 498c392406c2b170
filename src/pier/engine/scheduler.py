"""Deciding what one engine step computes. Pure: no model, no KV, tested table-driven."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    """Sequence number `index` (in admission order) feeds its next `n_tokens` pending tokens."""

    index: int
    n_tokens: int


def plan(pending: Sequence[int], budget: int) -> list[Work]:
    """One step's work. `pending[i]` is how many known tokens sequence i has not yet fed to the model
    (1 for a generating sequence, more while its prompt is being evaluated).

    Every generating sequence decodes one token first, so a long prompt never stalls running streams;
    the rest of the token budget goes to prompt chunks in admission order (first come, first served),
    so a waiting prompt is never starved either.
    """
    decode = [Work(i, 1) for i, n in enumerate(pending) if n == 1]
    left = budget - len(decode)
    prefill = []
    for i, n in enumerate(pending):
        if n > 1 and left > 0:
            take = min(n, left)
            prefill.append(Work(i, take))
            left -= take
    return decode + prefill
