"""How many KV cells finished prompts may keep as cached prefixes on speculation.

Idle prefixes are not free in llama.cpp's unified cache: attention runs over the cells up to the highest one
in use, so cells kept for prompts that never come back slow down every running sequence (a decode step about
10% at 2,560 idle cells, benchmarks/decode_cost.py), and new tokens land in the holes between them, scattered
(prefix_cache.py: scattered histories make prompt steps dearer).
So the prefix cache keeps two kinds of cells. Proven ones, the leading tokens of a prefix that a later prompt
reused (a shared system prompt, a chat's history), stay until their room is needed. Speculative ones, the rest
of every finished prompt, are held to this budget: a floor, plus the recent regret, fading by 1/`horizon` per
finished request. Regret is the tokens a prompt would have reused had an evicted prefix been kept. Unique
prompts keep the budget at its floor; a workload whose prompts come back raises it after its first misses.
(The prefix cache also keeps the most recently used prefix whole, whatever the budget.)

With host memory (`host_cache.py`), what leaves the KV cache is copied there first, so a conversation that comes
back is restored, not recomputed, and costs no regret; while copying, a finished sequence leaves at once (all but
its shared part, prefix_cache.py), so the budget only governs what is kept without copies. Copying costs a memory
copy and host memory, worth it only if prefixes come back: the budget also learns the return rate, the share of
departed prefixes that a later prompt came back to (restored, or regretted when none was kept), fading like the
regret. Below `min_return_rate` (unique prompts) nothing more is copied; evicted prompts are still remembered, so
the first regrets turn copying back on.
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
    min_return_rate: float = 1 / 32  # below it, prefixes leaving the KV cache are not copied to host memory
    returned: float = 1.0  # departed prefixes a prompt came back to, fading; starts at 1/1: copy until shown useless
    departed: float = 1.0  # prefixes that left the KV cache, fading the same way
    evicted_prompts: deque[list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.evicted_prompts = deque(maxlen=self.remembered)

    @property
    def cells(self) -> int:
        return min(self.ceiling, self.floor + round(self.regret))

    @property
    def return_rate(self) -> float:
        return min(1.0, self.returned / self.departed)

    @property
    def worth_saving(self) -> bool:
        """Should prefixes leaving the KV cache be copied to host memory?"""
        return self.return_rate >= self.min_return_rate

    def left_device(self) -> None:
        """A prefix left the KV cache (copied to host memory or not)."""
        self.departed += 1.0

    def came_back(self) -> None:
        """A prompt came back to a prefix that had left the KV cache."""
        self.returned += 1.0

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
        self.came_back()
        return best - reused

    def finished(self) -> None:
        fade = 1.0 - 1.0 / self.horizon
        self.regret *= fade
        self.returned *= fade
        self.departed *= fade
