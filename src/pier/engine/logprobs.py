"""Log-probabilities of tokens, as OpenAI defines them: the log-softmax of the model's logits at a position, after
the request's logit bias and before temperature, penalties, truncation, min_tokens or a grammar (so they say
what the model thinks of a token, not what the sampler was allowed to pick). Computed with numpy, one row at a
time, only for requests that ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TokenLogprob:
    """One position: the token there, its log-probability, and the `top` most likely tokens (best first)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


def biased(row: np.ndarray, bias: Mapping[int, float]) -> np.ndarray:
    if not bias:
        return row
    out = np.array(row, dtype=np.float32, copy=True)
    ids = np.fromiter(bias.keys(), dtype=np.int64, count=len(bias))
    out[ids] += np.fromiter(bias.values(), dtype=np.float32, count=len(bias))
    return out


def log_softmax(row: np.ndarray) -> np.ndarray:
    """Stable log-softmax in float64 (a 262k vocabulary sums many small terms)."""
    x = row.astype(np.float64)
    peak = x.max()
    return x - (peak + np.log(np.exp(x - peak).sum()))


def token_logprob(row: np.ndarray, token: int, top: int, bias: Mapping[int, float]) -> TokenLogprob:
    """`token`'s log-probability under one logits row, with the `top` most likely tokens."""
    lp = log_softmax(biased(row, bias))
    return TokenLogprob(token, float(lp[token]), top_tokens(lp, top))


def top_tokens(lp: np.ndarray, k: int) -> tuple[tuple[int, float], ...]:
    if k <= 0:
        return ()
    k = min(k, len(lp))
    best = np.argpartition(-lp, k - 1)[:k]
    best = best[np.argsort(-lp[best], kind="stable")]
    return tuple((int(t), float(lp[t])) for t in best)
