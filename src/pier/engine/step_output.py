"""What one engine step's forward pass hands to sampling and output: whose rows of the logits are whose, what the
pass carried and took, and what a chunk carries besides text (`EngineCore` only)."""

from __future__ import annotations

from dataclasses import dataclass

from pier.engine.logprobs import TokenLogprob
from pier.engine.sequence import Sequence


@dataclass(frozen=True)
class LogitRows:
    """A sequence's rows in one step's logits: `n_rows` of them from `first_row`, for positions from `position`."""

    seq: Sequence
    position: int
    first_row: int
    n_rows: int


@dataclass(frozen=True)
class ForwardPass:
    """What one step's forward pass carried (its decode rows and prompt tokens) and how long it took."""

    decode_rows: int
    prompt_tokens: int
    seconds: float


@dataclass(frozen=True)
class ChunkExtra:
    """What a chunk carries besides text when asked for: log-probabilities."""

    logprobs: tuple[TokenLogprob, ...]
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None

