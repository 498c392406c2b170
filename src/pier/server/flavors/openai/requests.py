"""The OpenAI API's request bodies: /v1/chat/completions and /v1/completions, and what each refuses.

Extras that benchmark tools and vLLM/llama.cpp clients send (`top_k`, `min_p`, `repetition_penalty`,
`ignore_eos`, `min_tokens`, `stop_token_ids`, `chat_template_kwargs`) are honoured.
"""

from __future__ import annotations

import uuid
from functools import cache, cached_property
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pier.engine.request import GenerateRequest, SamplingParams
from pier.engine.schema_check import SchemaCheck
from pier.errors import InvalidRequest
from pier.model.tools.tool_spec import ToolSet, tool_set
from pier.server.served_model import SEED_MODULUS, ServedModel
from pier.server.structured import Structure, response_format_structure, tgi_structure

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's (and vLLM's) default for the legacy completions API
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's top_logprobs (pier takes it for completions' logprobs too)
MAX_CHOICES = 16  # n and best_of; each also counts against the copy's concurrency


@cache
def _not_nullable(model: type[BaseModel]) -> frozenset[str]:
    """The optional fields of `model` whose type does not take None."""
    return frozenset(name for name, field in model.model_fields.items()
                     if not field.is_required() and field.annotation is not Any
                     and type(None) not in get_args(field.annotation))


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class OpenAIRequest(BaseModel):
    """Fields both APIs share. Unknown fields are accepted and ignored, as OpenAI-compatible servers do."""

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _null_is_the_default(cls, data: Any) -> Any:
        """OpenAI takes null for every optional field, meaning its default (`"n": null` is one choice, `"stream":
        null` no stream); clients such as LiteLLM send them. A field whose type has no None takes its default."""
        if not isinstance(data, dict):
            return data
        return {k: v for k, v in data.items() if v is not None or k not in _not_nullable(cls)}

    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    n: int = 1
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    repetition_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    ignore_eos: bool = False
    min_tokens: int = 0
    response_format: dict[str, Any] | None = None

    def refuse_unsupported(self) -> None:
        if not 1 <= self.n <= MAX_CHOICES:
            raise InvalidRequest(f"n must be between 1 and {MAX_CHOICES}; got {self.n}.", param="n")

    @property
    def sequences(self) -> int:
        """How many sequences this request runs (each counts against the copy's concurrency)."""
        return self.n

    def engine_logprobs(self) -> tuple[int | None, int | None]:
        """(logprobs, prompt_logprobs) for the engine: None when not asked."""
        return None, None

    def sampling(self, n_vocab: int) -> SamplingParams:
        top_k = self.top_k if self.top_k is not None else 0
        top_p = 1.0 if self.top_p is None else self.top_p
        if top_p == 0:  # OpenAI takes [0, 1]: the smallest nucleus is the most likely token (the engine takes (0, 1])
            top_k, top_p = 1, 1.0
        return SamplingParams(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_k=0 if top_k == -1 else min(top_k, n_vocab),  # vLLM spells "off" as -1
            top_p=top_p,
            min_p=self.min_p or 0.0,
            repetition_penalty=1.0 if self.repetition_penalty is None else self.repetition_penalty,
            frequency_penalty=self.frequency_penalty or 0.0,
            presence_penalty=self.presence_penalty or 0.0,
            seed=None if self.seed is None else self.seed % SEED_MODULUS,
            logit_bias=_token_biases(self.logit_bias or {}), grammar=self.grammar(),
        )

    def grammar(self) -> str | None:
        return self.structure.grammar

    def schema_check(self) -> SchemaCheck | None:
        return self.structure.check

    @cached_property
    def structure(self) -> Structure:
        """OpenAI's response_format; TGI's grammar shape ({"type": "json" | "regex", "value": ...}), which TGI's
        Messages API takes in the same field. Built once per request (the grammar and the check share it)."""
        kind = (self.response_format or {}).get("type")
        if kind in ("json", "regex"):
            return tgi_structure(self.response_format)
        return response_format_structure(self.response_format)

    def generate_request(
        self, model: ServedModel, prompt: list[int], max_tokens: int | None
    ) -> GenerateRequest:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        logprobs, prompt_logprobs = self.engine_logprobs()
        return GenerateRequest(
            request_id=uuid.uuid4().hex, prompt=prompt, sampling=self.sampling(model.n_vocab),
            max_tokens=model.max_new_tokens(len(prompt), max_tokens), stop=stop,
            stop_token_ids=list(self.stop_token_ids or []), ignore_eos=self.ignore_eos,
            min_tokens=self.min_tokens, add_bos=False, logprobs=logprobs, prompt_logprobs=prompt_logprobs,
        )

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


def _token_biases(raw: dict[str, float]) -> dict[int, float]:
    biases = {}
    for key, bias in raw.items():
        try:
            biases[int(key)] = bias
        except ValueError:
            raise InvalidRequest(
                f"logit_bias keys must be token ids written as strings (like \"1234\"); got {key!r}.",
                param="logit_bias",
            ) from None
    return biases


class TextPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None

    def text_of(self, role: str) -> str | None:
        """The part's text, or None for a part pier cannot read. OpenAI's assistant messages may hold `refusal` parts
        (the words the model refused with): a conversation sent back with one goes on, the refusal as its text."""
        if self.type == "text":
            return self.text
        refusal = (self.model_extra or {}).get("refusal")
        return refusal if self.type == "refusal" and role == "assistant" and isinstance(refusal, str) else None


class CalledFunction(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    arguments: str | dict[str, Any] = "{}"  # OpenAI sends a JSON string; TGI an object


class CalledTool(BaseModel):
    """A call in an assistant message of the history."""

    model_config = ConfigDict(extra="allow")
    id: str | None = None
    type: str = "function"
    function: CalledFunction


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[TextPart] | None = None
    tool_calls: list[CalledTool] | None = None
    tool_call_id: str | None = None

    def for_template(self) -> dict[str, Any]:
        message = self.model_dump(exclude_none=True)
        message["content"] = self._text()
        return message

    def _text(self) -> str | None:
        if not isinstance(self.content, list):
            return self.content
        texts = []
        for part in self.content:
            text = part.text_of(self.role)
            if text is None:
                raise InvalidRequest(
                    f"Only text content parts are supported; got a {part.type!r} part. Send the message "
                    "content as a string or as parts of type \"text\".", param="messages",
                )
            texts.append(text)
        return "\n".join(texts)


ROLES = ("system", "developer", "user", "assistant", "tool", "function")  # OpenAI's


def _refuse_functions(extra: dict[str, Any]) -> None:
    """OpenAI's deprecated `functions` and `function_call`, refused with the fix: ignored, like other unknown
    fields, the model would answer as if it had no functions and the client would wait for a call in vain."""
    for field, instead in (("functions", "send them as `tools`: [{\"type\": \"function\", \"function\": "
                                         "{\"name\", \"description\", \"parameters\"}}]"),
                           ("function_call", "send it as `tool_choice` (\"auto\", \"none\", \"required\" or "
                                             "{\"type\": \"function\", \"function\": {\"name\": ...}})")):
        if extra.get(field) not in (None, [], "none"):  # asking for no functions is no loss
            raise InvalidRequest(f"`{field}` is OpenAI's deprecated form of tool calling, which pier does not take; "
                                 f"{instead}. Calls come back in message.tool_calls.", param=field)


def message_problem(index: int, message: ChatMessage) -> InvalidRequest | None:
    """Why OpenAI would refuse the `index`th message (400, naming the field): a role it does not know, or no
    content where the role needs one (only an assistant message that makes tool calls may have none)."""
    where = f"messages[{index}]"
    if message.role not in ROLES:
        return InvalidRequest(f"Invalid value: {message.role!r} for {where}.role. Supported values are: "
                              f"{', '.join(repr(r) for r in ROLES)}.", param=f"{where}.role")
    for k, part in enumerate(message.content if isinstance(message.content, list) else ()):
        if part.type == "text" and part.text is None:  # not "only text parts are supported": it is one
            return InvalidRequest(f"{where}.content[{k}] is a text part without its `text`: send "
                                  "{\"type\": \"text\", \"text\": \"...\"}.", param=f"{where}.content[{k}].text")
    if message.content is None and not (message.role == "assistant" and message.tool_calls):
        needs = ("an assistant message needs content unless it has tool_calls" if message.role == "assistant"
                 else f"a {message.role} message needs its text")
        return InvalidRequest(f"Invalid value for {where}.content: expected a string or an array of content "
                              f"parts, got null ({needs}).", param=f"{where}.content")
    return None


class ChatCompletionRequest(OpenAIRequest):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    tool_prompt: str | None = None  # TGI's: what introduces the tools in pier's fallback prompt
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True

    def refuse_unsupported(self) -> None:
        super().refuse_unsupported()
        if self.max_completion_tokens is not None and self.max_completion_tokens < 1:  # named as the client sent it
            raise InvalidRequest(f"max_completion_tokens must be at least 1; got {self.max_completion_tokens}.",
                                 param="max_completion_tokens")
        _refuse_functions(self.model_extra or {})
        for index, message in enumerate(self.messages):
            if (problem := message_problem(index, message)) is not None:
                raise problem
        if self.top_logprobs is not None:
            if not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
                raise InvalidRequest(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}; got "
                                     f"{self.top_logprobs}.", param="top_logprobs")
            if not self.logprobs:
                raise InvalidRequest("top_logprobs needs logprobs: set \"logprobs\": true as well.",
                                     param="top_logprobs")

    def engine_logprobs(self) -> tuple[int | None, int | None]:
        return (self.top_logprobs or 0, None) if self.logprobs else (None, None)

    def tool_set(self) -> ToolSet:
        return tool_set(self.tools, self.tool_choice, parallel=self.parallel_tool_calls)


class CompletionRequest(OpenAIRequest):
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = COMPLETIONS_DEFAULT_MAX_TOKENS
    echo: bool = False
    logprobs: int | None = None
    best_of: int | None = None

    def refuse_unsupported(self) -> None:
        super().refuse_unsupported()
        if self.max_tokens == 0 and not self.echo:
            raise InvalidRequest("max_tokens 0 needs echo: it asks for the prompt's own logprobs (\"echo\": true, "
                                 "\"logprobs\": 0 or more) and nothing generated; to generate, set max_tokens to at "
                                 "least 1.", param="max_tokens")
        if self.logprobs is not None and not 0 <= self.logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidRequest(f"logprobs must be between 0 and {MAX_TOP_LOGPROBS}; got {self.logprobs}.",
                                 param="logprobs")
        if self.best_of is not None:
            if not self.n <= self.best_of <= MAX_CHOICES:
                raise InvalidRequest(f"best_of must be between n ({self.n}) and {MAX_CHOICES}; got {self.best_of}.",
                                     param="best_of")
            if self.stream and self.best_of > self.n:
                raise InvalidRequest("best_of cannot be used with stream: the best choices are known only at the "
                                     "end. Remove best_of or stream.", param="best_of")

    @property
    def sequences(self) -> int:
        return max(self.n, self.best_of or 1)

    @property
    def prompt_only(self) -> bool:
        """`echo` with max_tokens 0: OpenAI's scoring of a text, the prompt and its logprobs with nothing generated
        (the engine generates one token, which the answer leaves out)."""
        return self.echo and self.max_tokens == 0

    def engine_logprobs(self) -> tuple[int | None, int | None]:
        if self.logprobs is None:  # best_of ranks by cumulative logprob: the chosen tokens' are needed
            return (0 if self.sequences > self.n else None), None
        return self.logprobs, (self.logprobs if self.echo else None)

    def single_prompt(self) -> str | list[int]:
        """The one prompt of this request; several prompts in one request are refused, not batched."""
        prompt = self.prompt
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            if len(prompt) != 1:
                raise InvalidRequest(
                    f"Send one prompt per request; got {len(prompt)}. Send them as separate (concurrent) "
                    "requests: the engine batches them anyway.", param="prompt",
                )
            return prompt[0]
        return prompt  # type: ignore[return-value]
