"""What an engine is told when it starts: how many sequences at once, the step's size, the prefix cache, the
ITL bound and speculation (`EngineCore` reads it; a copy builds it from its settings)."""

from __future__ import annotations

from dataclasses import dataclass

from pier.engine.scheduler import ITL_BOUND
from pier.errors import InvalidRequest


@dataclass(frozen=True)
class EngineConfig:
    max_running: int = 8  # sequences decoding at once (llama-server's --parallel)
    step_tokens: int = 512  # most tokens in one llama_decode (n_batch)
    prefix_cache: bool = True
    prefix_floor_cells: int | None = None  # cells idle prefixes may always keep; None = a sixteenth of the cache
    host_cache_bytes: int = 0  # host memory for prefixes evicted from the KV cache; 0 = drop them instead
    # a step with generating sequences costs at most this many decode-only steps (engine/scheduler.py); None: no
    # bound, prompts may fill the whole step
    itl_bound: float | None = ITL_BOUND
    # n-gram speculation (engine/draft.py): a generating sequence may feed up to this many drafted tokens with its
    # next one when its history predicts them (TGI's SPECULATE); 0 = off
    speculate: int = 0

    def __post_init__(self) -> None:
        if self.max_running < 1 or self.step_tokens < self.max_running:
            raise InvalidRequest(
                f"step_tokens ({self.step_tokens}) must be >= max_running ({self.max_running}) >= 1, "
                "so every running sequence can decode in each step."
            )
