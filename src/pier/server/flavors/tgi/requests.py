"""Hugging Face TGI's generate request body (/generate, /generate_stream, and /invocations with `inputs`), with
TGI's defaults and checks in TGI's words.

The shapes and defaults are those of TGI 2.0, the version the Hugging Face LLM container runs in the seeds
(`huggingface-pytorch-tgi-inference:2.1-tgi2.0`, `get_huggingface_llm_image_uri("huggingface", version="2.0.0")`):
a request without `max_new_tokens` (or, for chat, `max_tokens`) generates at most 100 tokens; a Messages stream
sends one chunk per token whose `delta` always carries `role` and a `content` string, TGI's finish reasons
(`length`, `eos_token`, `stop_sequence`), no `[DONE]`, and no usage (TGI 2.3 and later put it on the last
chunk when `stream_options.include_usage` asks for it, and so does pier).

Sampling follows TGI: greedy unless `do_sample` or a warper (temperature != 1, top_k, top_p) is set; a
sampled request without a seed gets a random one, reported in `details.seed`.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pier.errors import InvalidRequest
from pier.server.served_model import ServedModel
from pier.server.structured import Structure, tgi_structure

# TGI 2.0's router: `default_max_new_tokens()` is Some(100) for generate, `max_tokens.or(Some(100))` for chat.
# (TGI 3 leaves it open: all that MAX_TOTAL_TOKENS leaves; pier's OpenAI routes do that, as OpenAI does.)
DEFAULT_MAX_NEW_TOKENS = 100
MAX_BEST_OF = 4  # TGI's --max-best-of (its default is 2); each sequence counts against the copy's concurrency
MAX_TOP_N_TOKENS = 5  # TGI's --max-top-n-tokens default


class GenerateParameters(BaseModel):
    # Strict types, as TGI's serde reads them: `"max_new_tokens": true` or `"5"`, `"do_sample": "yes"` are 422s, not
    # quietly 1, 5 and true (a number where a float goes is fine, as in serde).
    model_config = ConfigDict(extra="allow", strict=True)

    do_sample: bool = False
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    typical_p: float | None = None
    max_new_tokens: int | None = None
    repetition_penalty: float | None = None
    frequency_penalty: float | None = None
    return_full_text: bool | None = None
    stop: list[str] | str = Field(default_factory=list)
    seed: int | None = None
    details: bool = False
    decoder_input_details: bool = False
    truncate: int | None = None
    best_of: int | None = None
    top_n_tokens: int | None = None
    watermark: bool = False
    grammar: Any = None

    @property
    def stop_sequences(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else self.stop

    @cached_property
    def structure(self) -> Structure:
        """`grammar` as the grammar to sample under and the check after generation, built once per request."""
        return tgi_structure(self.grammar)

    @property
    def sampling_enabled(self) -> bool:
        """TGI samples when asked to, or when any warper would change the distribution."""
        warped = (
            (self.temperature is not None and self.temperature != 1.0) or bool(self.top_k)
            or (self.top_p is not None and self.top_p < 1.0)
        )
        return self.do_sample or warped

    def validate_for(self, model: ServedModel) -> None:
        """TGI's checks, in TGI's order and words."""
        for problem in self._problems(model.max_stop_sequences, model.limits.max_input_tokens):
            raise InvalidRequest(problem)

    def _problems(self, max_stops: int, max_input: int) -> Iterator[str]:
        if self.best_of is not None and not 0 < self.best_of <= MAX_BEST_OF:
            yield f"`best_of` must be > 0 and <= {MAX_BEST_OF}. Given: {self.best_of}"
        if (self.best_of or 1) > 1 and not self.sampling_enabled:
            yield "you must use sampling when `best_of` is > 1"
        if (self.best_of or 1) > 1 and self.seed is not None:
            yield "`seed` must not be set when `best_of` > 1"
        if self.temperature is not None and not self.temperature > 0:
            yield "`temperature` must be strictly positive (use do_sample=false for greedy decoding)"
        if self.repetition_penalty is not None and not self.repetition_penalty > 0:
            yield "`repetition_penalty` must be strictly positive (1.0 disables it)"
        if self.frequency_penalty is not None and not -2.0 <= self.frequency_penalty <= 2.0:
            yield "`frequency_penalty` must be >= -2.0 and <= 2.0"
        if self.top_p is not None and not 0.0 < self.top_p < 1.0:
            yield "`top_p` must be > 0.0 and < 1.0 (leave it out to disable it)"
        if self.typical_p is not None:
            yield "`typical_p` is not supported by this server: remove it (top_p or min_p are alternatives)"
        if self.top_k is not None and self.top_k <= 0:
            yield "`top_k` must be strictly positive (leave it out to disable it)"
        if self.max_new_tokens is not None and self.max_new_tokens <= 0:
            yield "`max_new_tokens` must be strictly positive"
        if len(self.stop_sequences) > max_stops:
            yield f"`stop` supports up to {max_stops} stop sequences. Given: {len(self.stop_sequences)}"
        if self.top_n_tokens is not None and not 0 <= self.top_n_tokens <= MAX_TOP_N_TOKENS:
            yield f"`top_n_tokens` must be >= 0 and <= {MAX_TOP_N_TOKENS}. Given: {self.top_n_tokens}"
        if self.watermark:
            yield "`watermark` is not supported by this server: remove it"
        if self.truncate is not None and not 0 < self.truncate <= max_input:
            yield f"`truncate` must be strictly positive and less than {max_input}. Given: {self.truncate}"


class GenerateRequestBody(BaseModel):
    """TGI's generate payload (also accepted on /invocations, where `stream` picks the streaming answer)."""

    model_config = ConfigDict(extra="allow", strict=True)

    inputs: str
    parameters: GenerateParameters = Field(default_factory=GenerateParameters)
    stream: bool = False
    add_special_tokens: bool = True
