"""What a step costs, learned from the steps run: the prompt tokens a step with running streams may carry.

A decode-only step's seconds (D) and what each prompt token adds to a step that has decode rows (c, seconds per
token, measured as (step - D) / prompt tokens) are running averages over the recent steps. The cap is
(k - 1) x D / c tokens, so a step with streams costs at most k x D (engine/scheduler.py states the policy).
Because c is measured at the cap's own size, it includes what a prompt chunk costs whatever its length (its pass
reads the weights once more): the average settles where the tokens really add (k - 1) x D.
"""

from __future__ import annotations

from pier.engine.scheduler import ITL_BOUND

MIN_CHUNK = 8  # prompts advance at least this much a step, however cheap decode steps are
FIRST_CAP = 32  # the cap until both costs have been seen
WEIGHT = 0.2  # of the newest step in the running averages: a few steps' memory, to follow changing load


class StepCost:
    def __init__(self, itl_bound: float = ITL_BOUND) -> None:
        self.itl_bound = itl_bound
        self.decode_s: float | None = None  # D
        self.token_s: float | None = None  # c

    def observe(self, decode_rows: int, prompt_tokens: int, seconds: float) -> None:
        """One step's forward pass took `seconds` for `decode_rows` generating sequences and `prompt_tokens`."""
        if decode_rows and not prompt_tokens:
            self.decode_s = _average(self.decode_s, seconds)
        elif decode_rows and self.decode_s is not None:
            self.token_s = _average(self.token_s, max(0.0, seconds - self.decode_s) / prompt_tokens)

    def prompt_cap(self) -> int:
        """The most prompt tokens a step with generating sequences may carry."""
        if self.decode_s is None or self.token_s is None:
            return FIRST_CAP
        if self.token_s <= 0:
            return 1 << 30  # prompt tokens cost nothing measurable: let the step budget bound them
        return max(MIN_CHUNK, round((self.itl_bound - 1) * self.decode_s / self.token_s))


def _average(old: float | None, new: float) -> float:
    return new if old is None else old + WEIGHT * (new - old)
