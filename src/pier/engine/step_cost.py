"""What a step costs, learned from the steps run: the prompt tokens a step with running streams may carry.

A decode-only step's seconds (D) and what each prompt token adds to a step that has decode rows (c, seconds per
token, measured as (step - D) / prompt tokens) are medians over the recent steps (a median, because on a shared
host one step in many takes ten times as long, and a mean would follow it). The cap is
(k - 1) x D / c tokens, so a step with streams costs at most k x D (engine/scheduler.py states the policy).
Because c is measured at the cap's own size, it includes what a prompt chunk costs whatever its length (its pass
reads the weights once more): the cap settles where the tokens really add (k - 1) x D.
"""

from __future__ import annotations

import statistics
from collections import deque

from pier.engine.scheduler import ITL_BOUND

MIN_CHUNK = 8  # prompts advance at least this much a step, however cheap decode steps are
FIRST_CAP = 32  # the cap until both costs have been seen
WINDOW = 15  # steps each median is over: enough to ignore a few slow ones, few enough to follow changing load


class StepCost:
    def __init__(self, itl_bound: float = ITL_BOUND) -> None:
        self.itl_bound = itl_bound
        self._decode: deque[float] = deque(maxlen=WINDOW)
        self._token: deque[float] = deque(maxlen=WINDOW)
        self._last_cap = FIRST_CAP

    @property
    def decode_s(self) -> float | None:
        """D: a decode-only step's seconds."""
        return statistics.median(self._decode) if self._decode else None

    @property
    def token_s(self) -> float | None:
        """c: the seconds a prompt token adds to a step with decode rows."""
        return statistics.median(self._token) if self._token else None

    def observe(self, decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        """One step's forward pass took `seconds` for `decode_rows` generating sequences and `prompt_tokens`."""
        if decode_rows and not prompt_tokens:
            self._decode.append(seconds)
        elif decode_rows and (decode_s := self.decode_s) is not None:
            self._token.append(max(0.0, seconds - decode_s) / prompt_tokens)

    def prompt_cap(self) -> int:
        """The most prompt tokens a step with generating sequences may carry. It at most doubles from one call to
        the next: D is only measured in decode-only steps, so while prompts keep coming it can be stale (measured
        on a busier host, it makes prompt tokens look free), and the cap then grows only as fast as the steps it
        shapes show their real cost."""
        decode_s, token_s = self.decode_s, self.token_s
        if decode_s is None or token_s is None:
            return FIRST_CAP
        wanted = (self.itl_bound - 1) * decode_s / token_s if token_s > 0 else float("inf")
        self._last_cap = max(MIN_CHUNK, round(min(wanted, 2 * self._last_cap)))
        return self._last_cap
