"""What the benchmark asks: conversations of synthetic prompts with exact token lengths, drawn from a seed.

`--input-len` counts the tokens of the content the benchmark writes (the prompt, or each user message); a
server adds its own (a BOS token, a chat template), which the results report from the server's `usage`.
A shared prefix is one system prompt that every conversation of a run starts with. A multi-turn
conversation sends each reply back with the next user message, so every round (a message and its reply)
extends the last.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from pier.bench.options import BenchOptions, WorkloadKind
from pier.bench.vocabulary import Content, TokenPool


@dataclass(frozen=True)
class Exchange:
    user: Content
    reply: str


@dataclass(frozen=True)
class Prompt:
    """One request, whatever the API: each client writes it in its own body shape."""

    system: Content | None
    history: tuple[Exchange, ...]
    user: Content
    max_tokens: int
    planned_input_tokens: int  # the content tokens known before sending (replies in the history excluded)


@dataclass(frozen=True)
class Round:
    user: Content
    input_tokens: int
    max_tokens: int


@dataclass(frozen=True)
class Conversation:
    index: int
    system: Content | None
    system_tokens: int
    rounds: tuple[Round, ...]

    def prompt(self, number: int, history: tuple[Exchange, ...]) -> Prompt:
        planned = self.system_tokens + sum(t.input_tokens for t in self.rounds[: number + 1])
        current = self.rounds[number]
        return Prompt(self.system, history, current.user, current.max_tokens, planned)


class Conversations:
    """An endless, reproducible stream of conversations: the same seed gives the same prompts, so two servers
    (or two repeats) can be sent exactly the same work."""

    def __init__(self, options: BenchOptions, pool: TokenPool, seed: str) -> None:
        self.options = options
        self.pool = pool
        self.rng = random.Random(seed)
        prefix = options.shared_prefix
        self.system = pool.sample(self.rng, prefix) if prefix else None

    def conversations(self) -> Iterator[Conversation]:
        index = 0
        while True:
            yield Conversation(index, self.system, self.options.shared_prefix, self._rounds())
            index += 1

    def _rounds(self) -> tuple[Round, ...]:
        count = self.options.turns if self.options.workload is WorkloadKind.MULTI_TURN else 1
        return tuple(self._round() for _ in range(count))

    def _round(self) -> Round:
        o = self.options
        input_tokens = positive_length(self.rng, o.input_len, o.input_len_stddev)
        max_tokens = positive_length(self.rng, o.output_len, o.output_len_stddev)
        return Round(self.pool.sample(self.rng, input_tokens), input_tokens, max_tokens)


def positive_length(rng: random.Random, mean: int, stddev: float) -> int:
    """A length from a normal distribution, drawn again until positive (llmperf's rule); `mean` when fixed."""
    if stddev == 0:
        return mean
    while (length := round(rng.gauss(mean, stddev))) <= 0:
        pass
    return length
