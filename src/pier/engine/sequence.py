"""The engine's state for one request in flight."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pier.engine.detok import TextStream
from pier.engine.draft import Drafter
from pier.engine.kv_cache import KvSlot
from pier.engine.logprobs import TokenLogprob, token_logprob
from pier.engine.request import GenerateRequest, GenerationChunk, RequestTimings
from pier.engine.sampling import TokenSampler

Emit = Callable[[GenerationChunk], None]


@dataclass(eq=False)
class Sequence:
    request: GenerateRequest
    tokens: list[int]  # prompt followed by every generated token
    prompt_len: int
    max_tokens: int
    sampler: TokenSampler
    text: TextStream
    emit: Emit
    arrived: float = field(default_factory=time.perf_counter)
    scheduled: float | None = None  # first put in a batch
    admitted: float = 0.0  # last given a KV slot (engine/scheduler.py: a prompt admitted after a stream began is new)
    first_token: float | None = None
    cached_n: int = 0  # prompt tokens that came from the prefix cache
    slack: int = 0  # prompt tokens younger prompts may still be computed ahead of this one (engine/scheduler.py)
    slot: KvSlot | None = None
    # A continuation's tokens as one chunk, emitted once: when added, or with their log-probabilities once the
    # prefill computed them (a request that asks for logprobs).
    replay: GenerationChunk | None = None
    replay_logprobs: list[TokenLogprob | None] | None = None
    # Prompt log-probabilities by position while the prompt is evaluated (when asked), handed out once.
    prompt_logprobs: list[TokenLogprob | None] | None = None
    prompt_logprobs_sent: bool = False
    # n-gram speculation (engine/draft.py): this sequence's drafter, with the engine's `speculate` on, and the draft
    # fed with its next token in the step being run
    drafter: Drafter | None = None
    draft: list[int] = field(default_factory=list)
    failed_once: bool = False  # llama_decode failed on it alone: computed again without cached KV (core._failed)

    @property
    def request_id(self) -> str:
        return self.request.request_id

    @property
    def wants_prompt_logprobs(self) -> bool:
        return self.request.prompt_logprobs is not None and not self.prompt_logprobs_sent

    @property
    def replay_waits_for_logprobs(self) -> bool:
        return self.replay is not None and self.request.logprobs is not None

    @property
    def needs_every_logit(self) -> bool:
        """Logits at every position it feeds (and so nothing from the prefix cache)."""
        return self.wants_prompt_logprobs or self.replay_waits_for_logprobs

    def take_prompt_logprobs(self) -> tuple[TokenLogprob | None, ...] | None:
        if self.prompt_logprobs is None or self.prompt_logprobs_sent:
            return None
        self.prompt_logprobs_sent = True
        return tuple(self.prompt_logprobs)

    def record_prompt_logprobs(self, rows: np.ndarray, position: int) -> None:
        """Row i holds the model's guess after position + i: the log-probability of the prompt (or continuation)
        token that came next. Each position is recorded once (a preempted sequence computes its prompt again)."""
        bias, n_replayed = self.request.sampling.logit_bias, len(self.request.continuation)
        if self.prompt_logprobs is None and self.request.prompt_logprobs is not None:
            self.prompt_logprobs = [None] * self.prompt_len
        if self.replay_logprobs is None and self.replay_waits_for_logprobs:
            self.replay_logprobs = [None] * n_replayed
        for i, row in enumerate(rows):
            at = position + i + 1
            if at < self.prompt_len and self.prompt_logprobs is not None and self.prompt_logprobs[at] is None:
                self.prompt_logprobs[at] = token_logprob(row, self.tokens[at], self.request.prompt_logprobs or 0, bias)
            replayed = at - self.prompt_len
            replays = self.replay_logprobs
            if 0 <= replayed < n_replayed and replays is not None and replays[replayed] is None:
                replays[replayed] = token_logprob(row, self.tokens[at], self.request.logprobs or 0, bias)

    @property
    def n_generated(self) -> int:
        return len(self.tokens) - self.prompt_len

    @property
    def n_computed(self) -> int:
        """Tokens whose KV is in the cache."""
        return len(self.slot) if self.slot is not None else 0

    @property
    def pending(self) -> int:
        """Known tokens not yet fed to the model: 1 while generating, more while the prompt is evaluated."""
        return len(self.tokens) - self.n_computed

    def timings(self, now: float) -> RequestTimings:
        scheduled = self.scheduled if self.scheduled is not None else now
        first = self.first_token if self.first_token is not None else now
        return RequestTimings(
            prompt_n=self.prompt_len - min(self.cached_n, self.prompt_len), cached_n=self.cached_n,
            prompt_ms=(first - scheduled) * 1000, predicted_n=self.n_generated,
            predicted_ms=(now - first) * 1000, queue_ms=(scheduled - self.arrived) * 1000,
            ttft_ms=(first - self.arrived) * 1000,
        )
