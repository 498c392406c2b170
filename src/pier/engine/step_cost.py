"""What a step costs, learned from the steps run: the prompt tokens a step with running streams may carry.

A decode-only step's seconds (D) and what each prompt token adds to a step that has decode rows (c, seconds per
token, measured as (step - D) / prompt tokens) are medians over the recent steps (a median, because on a shared
host one step in many takes ten times as long, and a mean would follow it). The cap is
(k - 1) x D / c tokens, so a step with streams costs at most k x D (engine/scheduler.py states the policy).
Because c is measured at the cap's own size, it includes what a prompt chunk costs whatever its length (its pass
reads the weights once more): the cap settles where the tokens really add (k - 1) x D.

D depends on how many rows decode: each row adds its own work (its output row, its attention), so 30 streams
cost several times what 8 do on a small model. Under load, decode-only steps come only while no prompt waits,
often at fewer rows than the steps the cap shapes, or never (a wave's prompts keep every step mixed until the
last is done): D is the line through the medians of the decode-only steps by row count, read at the step's own
rows, and when no recent decode-only step had about as many rows (`stale`), the engine runs one without prompt
tokens to measure it (a probe: one step in several while the row count moves, none while it holds). Read at the
wrong rows, a stale D made every prompt token look several times dearer than it is and the cap sat at its
floor (measured: D from one row, the cap at 8 tokens where 40 kept the bound; c = 32's last prompts waited
seconds).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable

from pier.engine.scheduler import ITL_BOUND

MIN_CHUNK = 8  # prompts advance at least this much a step, however cheap decode steps are
FIRST_CAP = 32  # the cap until both costs have been seen
WINDOW = 15  # steps each median is over: enough to ignore a few slow ones, few enough to follow changing load
FRESH_STEPS = 64  # a decode-only step this many steps old still says what one costs now
NEAR_ROWS = 0.125  # ... when it had within this share of the rows (at least 2 rows either way)


class StepCost:
    def __init__(self, itl_bound: float = ITL_BOUND) -> None:
        self.itl_bound = itl_bound
        self._decode: deque[tuple[int, float]] = deque(maxlen=2 * WINDOW)  # (rows, seconds) of decode-only steps
        self._decode_step: deque[int] = deque(maxlen=2 * WINDOW)  # ... and when each was observed
        self._token: deque[float] = deque(maxlen=WINDOW)
        self._rows = 0  # decode rows of the last step seen
        self._steps = 0
        self._last_cap = FIRST_CAP

    def decode_s(self, rows: int | None = None) -> float | None:
        """D: a decode-only step's seconds at `rows` decode rows (default: the last step's)."""
        return decode_line(self._decode, self._rows if rows is None else rows)

    def stale(self, rows: int) -> bool:
        """Whether no recent decode-only step had about `rows` rows: D there would be a guess, so the next step
        with that many streams should run without prompt tokens to measure it."""
        near = max(2.0, NEAR_ROWS * rows)
        return not any(abs(n - rows) <= near and self._steps - step < FRESH_STEPS
                       for (n, _), step in zip(self._decode, self._decode_step, strict=True))

    @property
    def token_s(self) -> float | None:
        """c: the seconds a prompt token adds to a step with decode rows."""
        return statistics.median(self._token) if self._token else None

    def observe(self, decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        """One step's forward pass took `seconds` for `decode_rows` generating sequences and `prompt_tokens`."""
        self._steps += 1
        if decode_rows:
            self._rows = decode_rows
        if decode_rows and not prompt_tokens:
            self._decode.append((decode_rows, seconds))
            self._decode_step.append(self._steps)
        elif decode_rows and (decode_s := self.decode_s(decode_rows)) is not None:
            self._token.append(max(0.0, seconds - decode_s) / prompt_tokens)

    def prompt_cap(self, decode_rows: int | None = None) -> int:
        """The most prompt tokens a step with `decode_rows` generating sequences (default: the last step's) may
        carry. It at most doubles from one call to the next: D is only measured in decode-only steps, so while
        prompts keep coming it can be stale (measured on a busier host, it makes prompt tokens look free), and the
        cap then grows only as fast as the steps it shapes show their real cost."""
        decode_s, token_s = self.decode_s(decode_rows), self.token_s
        if decode_s is None or token_s is None:
            return FIRST_CAP
        wanted = (self.itl_bound - 1) * decode_s / token_s if token_s > 0 else float("inf")
        self._last_cap = max(MIN_CHUNK, round(min(wanted, 2 * self._last_cap)))
        return self._last_cap


def decode_line(steps: Iterable[tuple[int, float]], rows: int) -> float | None:
    """A decode-only step's seconds at `rows` rows, from (rows, seconds) of recent ones: the least-squares line
    through each row count's median (weighted by how many steps it has), never falling with rows and never below
    the cheapest median; with one row count seen, that count's median. None before any."""
    by_rows: dict[int, list[float]] = {}
    for n, seconds in steps:
        by_rows.setdefault(n, []).append(seconds)
    if not by_rows:
        return None
    points = [(n, statistics.median(s), len(s)) for n, s in by_rows.items()]
    floor = min(m for _, m, _ in points)
    if len(points) == 1:
        return points[0][1]
    weight = sum(w for _, _, w in points)
    mean_n = sum(n * w for n, _, w in points) / weight
    mean_s = sum(m * w for _, m, w in points) / weight
    spread = sum(w * (n - mean_n) ** 2 for n, _, w in points)
    slope = max(0.0, sum(w * (n - mean_n) * (m - mean_s) for n, m, w in points) / spread)
    return max(floor, mean_s + slope * (rows - mean_n))
