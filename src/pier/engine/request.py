"""What goes into the engine (a request and its sampling parameters) and what comes out (chunks, timings)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pier.engine.logprobs import TokenLogprob
from pier.errors import InvalidRequest


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling. `temperature == 0` means greedy (argmax), like llama.cpp and vLLM."""

    temperature: float = 1.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0  # 1.0 = off (multiplicative, as in TGI / llama.cpp's repeat penalty)
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    penalty_last_n: int = 64  # how many recent tokens the penalties look at; -1 = the whole context
    seed: int | None = None
    logit_bias: Mapping[int, float] = field(default_factory=dict)
    # GBNF text (llama.cpp's grammar format, rule `root` first to match): every sampled token keeps the output a
    # prefix of a string the grammar accepts. Checked (compiled) once with the request; see engine/grammar.py.
    grammar: str | None = None
    # With triggers the grammar is lazy (llama.cpp's lazy grammar): the output is free until the text so far wholly
    # matches one of these regexes, and constrained from the start of the match's first group on (a tool call's
    # marker, after free text).
    grammar_triggers: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    @property
    def has_penalties(self) -> bool:
        return (
            self.repetition_penalty != 1.0 or self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
        )

    def validate(self, n_vocab: int) -> None:
        """Raise InvalidRequest naming the first bad value, its allowed range and the fix."""
        for problem in sampling_problems(self, n_vocab):
            raise InvalidRequest(problem[1], param=problem[0])


def sampling_problems(p: SamplingParams, n_vocab: int) -> list[tuple[str, str]]:
    """Every invalid value in `p` as (parameter, message). Pure, so it is tested table-driven."""
    checks: list[tuple[str, bool, str]] = [
        ("temperature", _finite(p.temperature) and p.temperature >= 0.0,
         f"temperature must be >= 0 (0 means greedy); got {p.temperature}."),
        ("top_k", p.top_k >= 0, f"top_k must be >= 0 (0 disables it); got {p.top_k}."),
        ("top_p", _finite(p.top_p) and 0.0 < p.top_p <= 1.0,
         f"top_p must be in (0, 1] (1 disables it); got {p.top_p}."),
        ("min_p", _finite(p.min_p) and 0.0 <= p.min_p <= 1.0,
         f"min_p must be in [0, 1] (0 disables it); got {p.min_p}."),
        ("repetition_penalty", _finite(p.repetition_penalty) and p.repetition_penalty > 0.0,
         f"repetition_penalty must be > 0 (1 disables it); got {p.repetition_penalty}."),
        ("frequency_penalty", _finite(p.frequency_penalty) and -2.0 <= p.frequency_penalty <= 2.0,
         f"frequency_penalty must be in [-2, 2]; got {p.frequency_penalty}."),
        ("presence_penalty", _finite(p.presence_penalty) and -2.0 <= p.presence_penalty <= 2.0,
         f"presence_penalty must be in [-2, 2]; got {p.presence_penalty}."),
        ("penalty_last_n", p.penalty_last_n >= -1,
         f"penalty_last_n must be >= -1 (-1 = whole context); got {p.penalty_last_n}."),
        ("seed", p.seed is None or 0 <= p.seed < 2**32 - 1,
         f"seed must be an integer in [0, 4294967294]; got {p.seed}."),
    ]
    problems = [(name, message) for name, ok, message in checks if not ok]
    for token, bias in p.logit_bias.items():
        if not 0 <= token < n_vocab:
            problems.append(("logit_bias", f"logit_bias names token {token}, outside the vocabulary [0, {n_vocab})."))
        elif not (math.isfinite(bias) or bias == -math.inf):
            problems.append(("logit_bias", f"logit_bias for token {token} must be a number; got {bias}."))
    return problems


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


@dataclass(frozen=True)
class GenerateRequest:
    """One generation. `prompt` is text (tokenized with BOS when `add_bos`) or token ids used exactly as given."""

    request_id: str
    prompt: str | Sequence[int]
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int | None = None  # None = until the context is full
    stop: Sequence[str] = ()
    stop_token_ids: Sequence[int] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    add_bos: bool = True
    parse_special: bool = True  # chat templates put control tokens like <|im_start|> in the text
    # Control tokens written to the output as the given text (llama.cpp writes control tokens as nothing), like
    # llama-server's preserved tokens: a tool-call marker such as Mistral's [TOOL_CALLS] that the answer is read by.
    special_text: Mapping[int, bytes] = field(default_factory=dict)
    # Tokens this request already generated on a copy that died (see engine/continuation.py): they follow the
    # prompt, count toward max_tokens and are not generated again; sampler and text stream replay over them.
    continuation: Sequence[int] = ()
    # Log-probabilities (engine/logprobs.py): None = not asked; k = each generated token's, with the k most likely
    # alternatives. prompt_logprobs: the same for every prompt token but the first (no prefix cache for them).
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    # The LoRA adapter (a name the runner loaded, engine/loaded_adapters.py) the model runs under; "" = the base model.
    adapter: str = ""


class FinishReason(StrEnum):
    STOP = "stop"  # EOS, a stop string or a stop token
    LENGTH = "length"  # max_tokens or the context is full
    ABORT = "abort"  # cancelled by the caller
    ERROR = "error"  # the engine failed


@dataclass(frozen=True)
class RequestTimings:
    """Per-request figures, named like llama.cpp's `timings` so they can be served as they are."""

    prompt_n: int  # prompt tokens evaluated, those not from the prefix cache (llama-server's meaning)
    cached_n: int  # prompt tokens taken from the prefix cache (not evaluated)
    prompt_ms: float
    predicted_n: int  # generated tokens
    predicted_ms: float
    queue_ms: float  # from submission until first scheduled
    ttft_ms: float  # from submission until the first token was sampled

    @property
    def prompt_per_second(self) -> float:
        return _rate(self.prompt_n, self.prompt_ms)

    @property
    def predicted_per_second(self) -> float:
        return _rate(self.predicted_n, self.predicted_ms)

    def as_dict(self) -> dict[str, float]:
        return {
            "prompt_n": self.prompt_n,
            "cache_n": self.cached_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_second": self.prompt_per_second,
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_second": self.predicted_per_second,
            "queue_ms": self.queue_ms,
            "ttft_ms": self.ttft_ms,
        }


def _rate(n: int, ms: float) -> float:
    return 1000.0 * n / ms if ms > 0 else 0.0


@dataclass(frozen=True)
class GenerationChunk:
    """What one engine step produced for one request: new text (complete UTF-8 only), new token ids,
    and on the last chunk the finish reason and timings."""

    request_id: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None
    stop_reason: str | int | None = None  # the stop string or token that ended it
    timings: RequestTimings | None = None
    error: str | None = None
    prompt_tokens: int = 0
    replayed: bool = False  # the continuation's tokens and the text they made, sent before by another copy
    logprobs: tuple[TokenLogprob | None, ...] = ()  # one per token id, when the request asked for them
    # On the first chunk after the prompt, when asked: one per prompt token (None for the first, which has no
    # context to be predicted from).
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None = None

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None
