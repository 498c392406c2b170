"""What an engine reports of itself (`EngineCore.stats()`): its sequences, KV cells, prefix cache hits, step times
and speculation, read by the copy's /metrics and its KV report."""

from __future__ import annotations

from dataclasses import dataclass, field

from pier.engine.step_times import StepTimes, StepTimesSnapshot


@dataclass(frozen=True)
class EngineStats:
    running: int
    waiting: int
    kv_cells_used: int
    kv_cells_total: int
    cached_prefixes: int
    prompt_tokens: int
    cached_prompt_tokens: int  # from the prefix cache: forked in the KV cache or restored from host memory
    generated_tokens: int
    preemptions: int
    steps: int
    prefix_budget_cells: int  # cells idle prefixes may keep now (0 with the prefix cache off)
    restored_prompt_tokens: int = 0  # the part of cached_prompt_tokens restored from host memory
    host_cache_entries: int = 0
    host_cache_bytes: int = 0
    step_timer: StepTimes = field(default_factory=StepTimes)  # the engine's own, read when asked (not each step)
    drafted_tokens: int = 0  # n-gram speculation: tokens drafted, and those the model wrote as drafted
    draft_kept_tokens: int = 0

    @property
    def step_times(self) -> StepTimesSnapshot:
        """The steps' times by kind so far: a copy taken now (any thread), at most a step newer than the rest."""
        return self.step_timer.snapshot()

    @property
    def prefix_hit_rate(self) -> float:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def device_hit_rate(self) -> float:
        """Prompt tokens shared from sequences in the KV cache / all prompt tokens."""
        device = self.cached_prompt_tokens - self.restored_prompt_tokens
        return device / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def host_hit_rate(self) -> float:
        """Prompt tokens restored from host memory / all prompt tokens."""
        return self.restored_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
