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
    """One step's work. `pending[i]` is how many known tokens sequence i (in admission order) has not yet fed to
    the model (1 for a generating sequence, more while its prompt is being evaluated).

    Every generating sequence decodes one token first, so a long prompt never stalls running streams. The rest of
    the token budget goes to prompts: the oldest prompt takes up to half of it, so it advances every step however
    many shorter prompts arrive (no prompt starves); then the shortest prompts first, so a short prompt that
    arrives behind a long one gets its first token a step later instead of after the whole long prompt; whatever
    is left goes on in that order. Prompts longer than the budget are computed in chunks (chunked prefill).
    """
    decode = [Work(i, 1) for i, n in enumerate(pending) if n == 1]
    prompts = [i for i, n in enumerate(pending) if n > 1]
    left = budget - len(decode)
    if not prompts or left <= 0:
        return decode
    take = dict.fromkeys(prompts, 0)
    take[prompts[0]] = min(pending[prompts[0]], max(1, left // 2))
    left -= take[prompts[0]]
    for i in sorted(prompts, key=lambda i: pending[i] - take[i]):
        more = min(pending[i] - take[i], left)
        take[i] += more
        left -= more
    return decode + [Work(i, take[i]) for i in prompts if take[i]]
