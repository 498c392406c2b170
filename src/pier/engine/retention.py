"""How many KV cells finished prompts may keep as cached prefixes on speculation.

Idle prefixes are not free in llama.cpp's unified cache: every decode attends over all cells up to the
highest one in use, masked or not, so cells kept for prompts that never come back slow down every running
sequence (benchmarks/decode_cost.py: 2,560 idle cells make a decode step about 10% slower at batch 1 to 8).
So the prefix cache keeps two kinds of cells. Proven ones, the leading tokens of a prefix that a later prompt
reused (a shared system prompt, a chat's history), stay until their room is needed. Speculative ones, the rest
of every finished prompt, are held to this budget: a floor, plus the recent regret, fading by 1/`horizon` per
finished request. Regret is the tokens a prompt would have reused had an evicted prefix been kept. Unique
prompts keep the budget at its floor; a workload whose prompts come back raises it after its first misses.
(The prefix cache also keeps the most recently used prefix whole, whatever the budget.)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from pier.engine.common_prefix import common_prefix


@dataclass
class RetentionBudget:
    floor: int  # speculative cells idle prefixes may always keep
    ceiling: int  # the whole cache
    horizon: int = 64  # finished requests over which regret fades to 1/e
    remembered: int = 64  # evicted prefixes remembered (their tokens only) to notice regret
    regret: float = 0.0
    evicted_prompts: deque[list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.evicted_prompts = deque(maxlen=self.remembered)

    @property
    def cells(self) -> int:
        return min(self.ceiling, self.floor + round(self.regret))

    def evicted(self, tokens: list[int]) -> None:
        """Speculative cells were dropped to stay within the budget: remember the tokens they held."""
        self.evicted_prompts.append(list(tokens))

    def admitted(self, prompt: Sequence[int], reused: int) -> int:
        """A prompt reused `reused` cached tokens. Returns how many more an evicted prefix would have given
        (that prefix is then forgotten, so one miss counts once); the budget grows by as much."""
        limit = len(prompt) - 1
        best, which = reused, -1
        for i, tokens in enumerate(self.evicted_prompts):
            length = common_prefix(tokens, prompt, limit)
            if length > best:
                best, which = length, i
        if which < 0:
            return 0
        del self.evicted_prompts[which]
        self.regret += best - reused
        return best - reused

    def finished(self) -> None:
        self.regret *= 1.0 - 1.0 / self.horizon
