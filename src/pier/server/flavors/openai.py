"""The OpenAI API: /v1/chat/completions, /v1/completions and /v1/models, with SSE streaming.

Extras that benchmark tools and vLLM/llama.cpp clients send (`top_k`, `min_p`, `repetition_penalty`,
`ignore_eos`, `min_tokens`, `stop_token_ids`, `chat_template_kwargs`) are honoured; llama.cpp-style
`timings` ride along in every final response.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from pier import __version__
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk, SamplingParams
from pier.engine.schema_check import SchemaCheck
from pier.engine.validate import CheckedRequest
from pier.errors import GenerationFailed, InvalidRequest
from pier.model.tools.reader import ToolReader
from pier.model.tools.spec import ToolSet, tool_set
from pier.model.tools.stream import CallStart, Event
from pier.model.tools.tool_format import Grammar
from pier.served_name import MODEL_NAME_HEADER, listed_name
from pier.server import choices, continuation, sse
from pier.server.admission import Ticket
from pier.server.errors import Flavor, error_event
from pier.server.flavors.logprobs import CompletionLogprobs, Piece, chat_logprobs, merged
from pier.server.generation import Completion, wait_for_disconnect
from pier.server.served_model import SEED_MODULUS, ServedModel
from pier.server.state import ServerState, State
from pier.server.structured import Structure, response_format_structure, tgi_structure

log = logging.getLogger(__name__)
router = APIRouter(tags=["OpenAI"])

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's (and vLLM's) default for the legacy completions API
MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat's top_logprobs (pier takes it for completions' logprobs too)
MAX_CHOICES = 16  # n and best_of; each also counts against the copy's concurrency


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class _OpenAIRequest(BaseModel):
    """Fields both APIs share. Unknown fields are accepted and ignored, as OpenAI-compatible servers do."""

    model_config = ConfigDict(extra="allow")

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
        return SamplingParams(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_k=0 if top_k == -1 else min(top_k, n_vocab),  # vLLM spells "off" as -1
            top_p=1.0 if self.top_p is None else self.top_p,
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
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise InvalidRequest(
                    f"Only text content parts are supported; got a {part.type!r} part. Send the message "
                    "content as a string or as parts of type \"text\".", param="messages",
                )
        return "\n".join(part.text or "" for part in self.content)


ROLES = ("system", "developer", "user", "assistant", "tool", "function")  # OpenAI's


def message_problem(index: int, message: ChatMessage) -> InvalidRequest | None:
    """Why OpenAI would refuse the `index`th message (400, naming the field): a role it does not know, or no
    content where the role needs one (only an assistant message that makes tool calls may have none)."""
    where = f"messages[{index}]"
    if message.role not in ROLES:
        return InvalidRequest(f"Invalid value: {message.role!r} for {where}.role. Supported values are: "
                              f"{', '.join(repr(r) for r in ROLES)}.", param=f"{where}.role")
    if message.content is None and not (message.role == "assistant" and message.tool_calls):
        needs = ("an assistant message needs content unless it has tool_calls" if message.role == "assistant"
                 else f"a {message.role} message needs its text")
        return InvalidRequest(f"Invalid value for {where}.content: expected a string or an array of content "
                              f"parts, got null ({needs}).", param=f"{where}.content")
    return None


class ChatCompletionRequest(_OpenAIRequest):
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


class CompletionRequest(_OpenAIRequest):
    prompt: str | list[int] | list[str] | list[list[int]]
    max_tokens: int | None = COMPLETIONS_DEFAULT_MAX_TOKENS
    echo: bool = False
    logprobs: int | None = None
    best_of: int | None = None

    def refuse_unsupported(self) -> None:
        super().refuse_unsupported()
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


# -- routes ------------------------------------------------------------------------------------------


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, http: Request, state: State
) -> Response:
    body.model = body.model or http.headers.get(MODEL_NAME_HEADER)  # the name answers carry (pier.served_name)
    return await respond_chat(body, http, state)


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, http: Request, state: State) -> Response:
    body.model = body.model or http.headers.get(MODEL_NAME_HEADER)
    return await respond_completion(body, http, state)


@router.get("/v1/models")
async def models(http: Request, state: State) -> dict[str, Any]:
    name, created, max_len = state.listed()
    return {"object": "list", "data": [{
        "id": listed_name(http.headers, name), "object": "model", "created": created, "owned_by": "pier",
        "max_model_len": max_len,
    }]}


class ChatView(Protocol):
    """How one chat request's output is shaped: OpenAI's (pier's /v1 routes) or TGI's Messages API (/invocations)."""

    flavor: Flavor  # the shape of an error event after the stream began
    head: dict[str, Any]  # the fields every chunk carries (id, created, ...)

    def response(self, done: Completion) -> dict[str, Any]: ...

    def opening(self) -> list[dict[str, Any]]: ...

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]: ...

    def frame(self, event: dict[str, Any]) -> bytes: ...

    def closing(self) -> list[bytes]: ...


def openai_chat_view(model: ServedModel, body: ChatCompletionRequest, tools: ToolSet) -> ChatView:
    piece = model.engine.runner.piece if body.logprobs else None
    view = _View(body.model or model.name, chat=True, include_usage=body.include_usage, piece=piece,
                 tools=ToolReader(model.tool_format.family, tools) if tools.active else None,
                 check=body.schema_check())
    continuation.keep(view.head, "id", "created")  # the same on any copy that continues it
    return view


async def respond_chat(
    body: ChatCompletionRequest, http: Request, state: ServerState, *,
    view: Callable[[ServedModel, ChatCompletionRequest, ToolSet], ChatView] = openai_chat_view,
    default_max_tokens: int | None = None,
) -> Response:
    """One chat request. Without max_tokens it may generate up to the model's limit (OpenAI's semantics) unless
    the dialect has a default of its own (TGI's Messages API: 100)."""
    body.refuse_unsupported()
    if body.n > 1 and view is not openai_chat_view:
        raise InvalidRequest("n must be 1 on TGI's Messages API; use pier's /v1/chat/completions for several "
                             "choices.", param="n")
    tools = body.tool_set()
    model, ticket = state.admit(body.sequences)
    with ticket:
        tool_format = model.tool_format
        prompt = await model.render_chat(
            tool_format.messages([m.for_template() for m in body.messages], tools, body.tool_prompt),
            add_generation_prompt=body.add_generation_prompt, tools=tool_format.template_tools(tools),
            extra=body.chat_template_kwargs,
        )
        max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        request = body.generate_request(model, prompt, default_max_tokens if max_tokens is None else max_tokens)
        request = _forcing_calls(request, tool_format.grammar(tools))
        if tools.active and model.tool_markers:
            request = replace(request, special_text=model.tool_markers)
        checked = choices.check_all(model, choices.choice_requests(request, body.sequences))
        views = _views(lambda: view(model, body, tools), len(checked))  # keeps what a continuation must repeat
        for k, shaped in enumerate(views):  # each choice's calls get ids of their own
            reader = getattr(shaped, "tools", None)
            if isinstance(reader, ToolReader):
                reader.choice = k
        return await _answer(model, checked, views, body, http, ticket)


def _forcing_calls(request: GenerateRequest, grammar: Grammar | None) -> GenerateRequest:
    """The request under its calls' grammar: forced from the first token, or lazy (`auto`, see ToolFormat)."""
    if grammar is None:
        return request
    if request.sampling.grammar is not None:
        if grammar.triggers:  # auto beside response_format: the format's grammar rules, calls are only parsed
            return request
        raise InvalidRequest("A forced tool_choice cannot be combined with response_format: send one of them.",
                             param="tool_choice")
    sampling = replace(request.sampling, grammar=grammar.text, grammar_triggers=grammar.triggers)
    return replace(request, sampling=sampling)


async def respond_completion(body: CompletionRequest, http: Request, state: ServerState) -> Response:
    body.refuse_unsupported()
    model, ticket = state.admit(body.sequences)
    with ticket:
        given = body.single_prompt()
        # Token ids are used exactly as given (no BOS), as llama-server and vLLM do.
        prompt = await model.tokenize(given) if isinstance(given, str) else list(given)
        request = body.generate_request(model, prompt, body.max_tokens)
        checked = choices.check_all(model, choices.choice_requests(request, body.sequences))
        echo = (given if isinstance(given, str) else model.detokenize(prompt)) if body.echo else ""
        piece = model.engine.runner.piece if body.logprobs is not None else None
        check = body.schema_check()

        def make() -> _View:
            return _View(body.model or model.name, chat=False, include_usage=body.include_usage, echo=echo, piece=piece,
                         prompt=prompt, check=check)

        views = _views(make, len(checked))
        continuation.keep(views[0].head, "id", "created")  # the same on any copy that continues it
        return await _answer(model, checked, views, body, http, ticket)


def _views(make: Callable[[], ChatView], n: int) -> list[ChatView]:
    """One view per choice, all with the first one's id and creation time."""
    views = [make()]
    for _ in range(n - 1):
        sibling = make()
        sibling.head = views[0].head
        views.append(sibling)
    return views


async def _answer(
    model: ServedModel, checked: list[CheckedRequest], views: list[ChatView], body: _OpenAIRequest,
    http: Request, ticket: Ticket,
) -> Response:
    if body.stream:
        events = _events(model, checked[0], views[0]) if len(checked) == 1 else _choice_events(model, checked, views)
        return sse.EventStream(events, ticket.hand_off())
    if len(checked) == 1:
        return JSONResponse(views[0].response(await model.complete(checked[0], wait_for_disconnect(http.receive))))
    done = await choices.complete_all(model, checked, http.receive)
    best = choices.ranked(done)[: body.n] if body.sequences > body.n else range(body.n)
    return JSONResponse(_merged([views[i].response(done[i]) for i in best], done))


def _merged(answers: list[dict[str, Any]], done: list[Completion]) -> dict[str, Any]:
    """Several choices as one answer; usage counts every sequence generated (best_of's too), as OpenAI bills."""
    merged = dict(answers[0])
    merged["choices"] = [{**answer["choices"][0], "index": i} for i, answer in enumerate(answers)]
    merged["usage"] = _usage(done[0].prompt_tokens, sum(len(d.token_ids) for d in done))
    return merged


# -- responses ---------------------------------------------------------------------------------------

_FINISH = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}


class _View:
    """Shapes one request's output as a chat completion or a text completion, whole or in chunks. With `piece`
    (the runner's token bytes) it writes the log-probabilities too; with `check` (a response_format schema) the
    last choice carries `schema_check` when the schema was checked after generation or the output breaks it."""

    flavor = Flavor.OPENAI

    def __init__(
        self, model: str, *, chat: bool, include_usage: bool, echo: str = "", piece: Piece | None = None,
        prompt: Sequence[int] = (), tools: ToolReader | None = None, check: SchemaCheck | None = None,
    ) -> None:
        self.chat = chat
        self.check = check
        self.text = ""  # a stream's output so far, for the check at its end
        self.tools = tools
        self.include_usage = include_usage
        self.echo = echo
        self.piece = piece
        self.prompt = prompt
        self.head = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", "object": "",
            "created": int(time.time()),
            "model": model, "system_fingerprint": f"pier-{__version__}",
        }
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._offsets: CompletionLogprobs | None = None  # a completion stream's running text offsets

    def response(self, done: Completion) -> dict[str, Any]:
        text = self.echo + done.text
        choice: dict[str, Any] = {"index": 0, "text": text}
        if self.chat:
            choice = {"index": 0, "message": self._message(text)}
        logprobs = self._logprobs(done.token_ids, done.logprobs, done.prompt_logprobs, first=True)
        finish = _FINISH.get(done.finish_reason, "stop")
        if self.chat and choice["message"].get("tool_calls"):
            finish = "tool_calls"
        choice |= {"logprobs": logprobs, "finish_reason": finish}
        report = self.check.report(done.text) if self.check is not None else None
        if report is not None:
            choice["schema_check"] = report
        return {
            **self.head, "object": "chat.completion" if self.chat else "text_completion", "choices": [choice],
            "usage": _usage(done.prompt_tokens, len(done.token_ids)),
            "timings": done.timings.as_dict() if done.timings else None,
        }

    def _logprobs(
        self, tokens: Sequence[int], lps: Sequence[TokenLogprob | None],
        prompt_lps: Sequence[TokenLogprob | None] | None, *, first: bool,
    ) -> dict[str, Any] | None:
        if self.piece is None:
            return None
        lps = lps or (None,) * len(tokens)
        if self.chat:
            return chat_logprobs(self.piece, tokens, lps)
        if first:  # the echoed prompt's own tokens come first when it has their log-probabilities
            with_prompt = bool(self.echo) and prompt_lps is not None
            self._offsets = CompletionLogprobs(self.piece, 0 if with_prompt else len(self.echo))
            if with_prompt and prompt_lps is not None:
                return merged([self._offsets.add(self.prompt, prompt_lps), self._offsets.add(tokens, lps)])
        assert self._offsets is not None
        return self._offsets.add(tokens, lps)

    def _message(self, text: str) -> dict[str, Any]:
        if self.tools is None:
            return {"role": "assistant", "content": text}
        parsed = self.tools.whole(text)
        message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
        if parsed.calls:
            message["tool_calls"] = [
                {"id": self.tools.call_id(str(self.head["id"]), i), "type": "function",
                 "function": {"name": call.name, "arguments": call.arguments}}
                for i, call in enumerate(parsed.calls)
            ]
        return message

    def opening(self) -> list[dict[str, Any]]:
        if self.chat:
            return [self._chunk({"role": "assistant", "content": ""}, None)]
        return [self._chunk(self.echo, None)] if self.echo else []

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        first = self.completion_tokens == 0 and self._offsets is None
        self.prompt_tokens = chunk.prompt_tokens
        self.completion_tokens += len(chunk.token_ids)
        if self.check is not None:
            self.text += chunk.text
        events = []
        if self.tools is not None:
            events += self._tool_chunks(chunk)
        elif chunk.text or (self.piece is not None and chunk.token_ids):
            logprobs = self._logprobs(chunk.token_ids, chunk.logprobs, chunk.prompt_logprobs, first=first)
            events.append(self._chunk({"content": chunk.text} if self.chat else chunk.text, None, logprobs))
        if chunk.finish_reason is not None:
            finish = _FINISH.get(chunk.finish_reason, "stop")
            if self.tools is not None and self.tools.called:
                finish = "tool_calls"
            last = self._chunk({} if self.chat else "", finish)
            report = self.check.report(self.text) if self.check is not None else None
            if report is not None:
                last["choices"][0]["schema_check"] = report
            last["timings"] = chunk.timings.as_dict() if chunk.timings else None
            events.append(last)
            if self.include_usage:
                events.append({**self.head, "object": self._object, "choices": [],
                               "usage": _usage(self.prompt_tokens, self.completion_tokens)})
        return events

    def _tool_chunks(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        """A chunk's text read for calls (text that may open a call is held back); its log-probabilities ride on
        the first event it releases, or on an empty delta when it releases none."""
        assert self.tools is not None
        read = self.tools.push(chunk.text) + (self.tools.finish() if chunk.finished else [])
        logprobs = None
        if self.piece is not None and chunk.token_ids:
            logprobs = self._logprobs(chunk.token_ids, chunk.logprobs, chunk.prompt_logprobs, first=False)
        deltas = [self._delta(event) for event in read] or ([{}] if logprobs is not None else [])
        return [self._chunk(delta, None, logprobs if i == 0 else None) for i, delta in enumerate(deltas)]

    def _delta(self, event: Event) -> dict[str, Any]:
        if isinstance(event, str):
            return {"content": event}
        if isinstance(event, CallStart):
            assert self.tools is not None
            return {"tool_calls": [{"index": event.index, "id": self.tools.call_id(str(self.head["id"]), event.index),
                                    "type": "function", "function": {"name": event.name, "arguments": ""}}]}
        return {"tool_calls": [{"index": event.index, "function": {"arguments": event.fragment}}]}

    @property
    def _object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    def frame(self, event: dict[str, Any]) -> bytes:
        return sse.event(event)

    def closing(self) -> list[bytes]:
        return [sse.event("[DONE]")]

    def _chunk(
        self, delta: dict[str, Any] | str, finish_reason: str | None, logprobs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "delta": delta} if self.chat else {"index": 0, "text": delta}
        choice |= {"logprobs": logprobs, "finish_reason": finish_reason}
        event = {**self.head, "object": self._object, "choices": [choice]}
        if self.include_usage:
            event["usage"] = None  # OpenAI sends null usage on every chunk but the last when asked for it
        return event


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _choice_events(
    model: ServedModel, checked: list[CheckedRequest], views: list[ChatView],
) -> AsyncGenerator[bytes, None]:
    """Several choices in one stream, their chunks interleaved as they come, each with its index; one usage
    chunk at the end for all of them when asked for."""
    first = views[0]
    progress = continuation.current()
    if progress is not None and progress.continuation is not None and progress.continuation.opened:
        # Another copy began this stream and died; its choices cannot be continued (server/choices.py). Say so
        # at the end of what the client has, rather than end the stream silently.
        progress.stopped()
        yield error_event(GenerationFailed(
            "The model server streaming this answer stopped, and a stream with several choices cannot be continued "
            "on another copy. Send the request again (with a seed, the choices come out the same)."), first.flavor)
        for tail in first.closing():
            yield tail
        return
    try:
        for i, view in enumerate(views):
            for event in view.opening():
                yield first.frame(_indexed(event, i))
        async for i, chunk in choices.stream_all(model, checked):
            for event in views[i].chunk(chunk):
                if event["choices"]:  # each view's own usage chunk is replaced by the total below
                    yield first.frame(_indexed(event, i))
        if isinstance(first, _View) and first.include_usage:
            usage = _usage(first.prompt_tokens, sum(v.completion_tokens for v in views if isinstance(v, _View)))
            yield first.frame({**first.head, "object": first._object, "choices": [], "usage": usage})
    except Exception as error:  # after the 200 an error can only be an event; never cut the stream silently
        if not isinstance(error, InvalidRequest):
            log.warning("stream %s failed: %s", checked[0].request.request_id, error)
        yield error_event(error, first.flavor)
    for tail in first.closing():
        yield tail


def _indexed(event: dict[str, Any], index: int) -> dict[str, Any]:
    event["choices"][0]["index"] = index
    return event


async def _events(model: ServedModel, checked: CheckedRequest, view: ChatView) -> AsyncGenerator[bytes, None]:
    try:
        for event in view.opening():
            yield view.frame(event)
        async for chunk in model.stream(checked):
            for event in view.chunk(chunk):
                yield view.frame(event)
    except Exception as error:  # after the 200 an error can only be an event; never cut the stream silently
        if not isinstance(error, InvalidRequest):
            log.warning("stream %s failed: %s", checked.request.request_id, error)
        yield error_event(error, view.flavor)
    for tail in view.closing():
        yield tail
