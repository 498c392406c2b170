"""Hugging Face TGI's API: /generate, /generate_stream, /info and /health, with TGI's defaults and messages, and
TGI's Messages API as SageMaker's /invocations serves it.

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

import json
import logging
import random
import time
import uuid
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from pier import __version__
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk, SamplingParams
from pier.engine.schema_check import SchemaCheck
from pier.engine.validate import CheckedRequest
from pier.error_bodies import tgi_answer
from pier.errors import InvalidRequest
from pier.model.tools.reader import ToolReader
from pier.model.tools.spec import ToolSet
from pier.model.tools.stream import CallStart, Event
from pier.server import choices, continuation, sse
from pier.server.errors import Flavor, error_event
from pier.server.flavors.logprobs import tgi_chat_logprobs, tgi_top
from pier.server.flavors.openai import ChatCompletionRequest, respond_chat
from pier.server.generation import Completion, wait_for_disconnect
from pier.server.served_model import SEED_MODULUS, ServedModel
from pier.server.state import ServerState, State, Status
from pier.server.structured import tgi_grammar, tgi_structure

log = logging.getLogger(__name__)
router = APIRouter(tags=["TGI"])

# TGI 2.0's router: `default_max_new_tokens()` is Some(100) for generate, `max_tokens.or(Some(100))` for chat.
# (TGI 3 leaves it open: all that MAX_TOTAL_TOKENS leaves; pier's OpenAI routes do that, as OpenAI does.)
DEFAULT_MAX_NEW_TOKENS = 100
CHECK_HEADER = "x-pier-schema-check"  # what the check after generation found (engine/schema_check.py)
MAX_BEST_OF = 4  # TGI's --max-best-of (its default is 2); each sequence counts against the copy's concurrency
MAX_TOP_N_TOKENS = 5  # TGI's --max-top-n-tokens default


class GenerateParameters(BaseModel):
    model_config = ConfigDict(extra="allow")

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

    model_config = ConfigDict(extra="allow")

    inputs: str
    parameters: GenerateParameters = Field(default_factory=GenerateParameters)
    stream: bool = False
    add_special_tokens: bool = True


# -- routes ------------------------------------------------------------------------------------------


@router.post("/generate", response_model=None)
async def generate(body: GenerateRequestBody, http: Request, state: State) -> Response:
    return await respond(body, http, state, streaming=False, full_text_default=False, as_list=False)


@router.post("/generate_stream", response_model=None)
async def generate_stream(
    body: GenerateRequestBody, http: Request, state: State
) -> Response:
    return await respond(body, http, state, streaming=True, full_text_default=False, as_list=False)


@router.get("/info")
async def info(state: State) -> dict[str, Any]:
    if state.embedder is not None:  # Text Embeddings Inference's /info
        embedder = state.embedder.embedder
        return {
            "model_id": state.embedder.name, "model_sha": None, "model_dtype": "gguf",
            "model_type": {"embedding": {"pooling": embedder.pooling}},
            "max_concurrent_requests": state.settings.max_concurrent_requests,
            "max_input_length": embedder.n_batch, "max_batch_tokens": embedder.n_batch,
            "max_batch_requests": embedder.n_seq_max, "auto_truncate": False, "version": __version__,
        }
    model = state.loaded()
    settings = state.settings
    return {
        "model_id": model.name, "model_sha": None, "model_dtype": "gguf",
        "model_device_type": model.info.device_type, "pier_devices": list(model.info.devices),
        "model_pipeline_tag": "text-generation", "max_concurrent_requests": settings.max_concurrent_requests,
        "max_best_of": MAX_BEST_OF, "max_stop_sequences": model.max_stop_sequences,
        "max_input_tokens": model.limits.max_input_tokens, "max_input_length": model.limits.max_input_tokens,
        "max_total_tokens": model.limits.max_total_tokens,
        "max_batch_total_tokens": model.engine.runner.n_ctx, "max_batch_size": settings.parallel,
        "validation_workers": 1, "max_client_batch_size": 1, "router": "pier", "version": __version__,
        "sha": None, "docker_label": None, "chat_template": model.chat.origin.as_dict(),
    }


@router.get("/health", response_model=None)
async def health(state: State) -> Response:
    if state.status is Status.READY:
        return Response(status_code=200)
    return tgi_answer(503, state.not_ready_message(), "healthcheck").response()


async def respond(
    body: GenerateRequestBody, http: Request, state: ServerState, *, streaming: bool, full_text_default: bool,
    as_list: bool,
) -> Response:
    """One TGI generation. /invocations answers a list and returns the full text by default, as TGI's
    SageMaker route does for text-generation models; /generate answers an object without the prompt."""
    params = body.parameters
    best_of = params.best_of or 1
    if best_of > 1 and streaming:
        raise InvalidRequest("`best_of` != 1 is not supported when streaming tokens")
    model, ticket = state.admit(best_of if 0 < best_of <= MAX_BEST_OF else 1)  # else refused just below
    with ticket:
        params.validate_for(model)
        if not body.inputs:
            raise InvalidRequest("`inputs` cannot be empty")
        request, seed = await _generate_request(model, body)
        checked = choices.check_all(model, choices.choice_requests(request, best_of))
        full_text = params.return_full_text if params.return_full_text is not None else full_text_default
        view = _View(
            model, request, seed=seed, prefix=body.inputs if full_text else "", details=params.details,
            prefill=params.details or params.decoder_input_details, top_n=params.top_n_tokens or 0,
        )
        if seed is not None:  # as run: a continuation keeps the seed of the copy that began it
            view.seed = checked[0].request.sampling.seed
        if streaming:
            return sse.EventStream(_events(model, checked[0], view), ticket.hand_off())
        if best_of == 1:
            done = await model.complete(checked[0], wait_for_disconnect(http.receive))
            answer = view.response(done)
        else:
            every = await choices.complete_all(model, checked, http.receive)
            order = choices.ranked(every)
            done = every[order[0]]
            answer = view.response(done, seed=checked[order[0]].request.sampling.seed)
            if params.details:
                answer["details"]["best_of_sequences"] = [
                    view.sequence(every[i], checked[i].request.sampling.seed) for i in order[1:]]
        return JSONResponse([answer] if as_list else answer,
                            headers=_headers(done) | _check_header(tgi_structure(params.grammar).check, done))


async def _generate_request(model: ServedModel, body: GenerateRequestBody) -> tuple[GenerateRequest, int | None]:
    params = body.parameters
    prompt = await model.tokenize(body.inputs, add_bos=None if body.add_special_tokens else False)
    if params.truncate is not None:
        prompt = prompt[-params.truncate:]  # TGI keeps the end of an over-long input
    requested = DEFAULT_MAX_NEW_TOKENS if params.max_new_tokens is None else params.max_new_tokens
    max_new = model.max_new_tokens(len(prompt), requested)
    seed = None
    if params.sampling_enabled:
        seed = params.seed % SEED_MODULUS if params.seed is not None else random.randrange(SEED_MODULUS)
        top_k = min(params.top_k or 0, model.n_vocab)
        sampling = SamplingParams(
            temperature=params.temperature or 1.0, top_k=top_k, top_p=params.top_p or 1.0, seed=seed,
            repetition_penalty=params.repetition_penalty or 1.0,
            frequency_penalty=params.frequency_penalty or 0.0,
        )
    else:
        sampling = SamplingParams(
            temperature=0.0, repetition_penalty=params.repetition_penalty or 1.0,
            frequency_penalty=params.frequency_penalty or 0.0,
        )
    sampling = replace(sampling, grammar=tgi_grammar(params.grammar))
    # Log-probabilities cost a softmax per token: computed when the answer shows them (details, top_n_tokens,
    # decoder_input_details) or best_of ranks by them.
    wants = params.details or bool(params.top_n_tokens) or (params.best_of or 1) > 1
    request = GenerateRequest(
        request_id=uuid.uuid4().hex, prompt=prompt, sampling=sampling, max_tokens=max_new,
        stop=params.stop_sequences, add_bos=False, logprobs=(params.top_n_tokens or 0) if wants else None,
        prompt_logprobs=0 if params.decoder_input_details else None,
    )
    return request, seed


# -- responses ---------------------------------------------------------------------------------------


def _finish_reason(reason: FinishReason, stop_reason: str | int | None) -> str:
    if reason is FinishReason.LENGTH:
        return "length"
    return "stop_sequence" if isinstance(stop_reason, str) else "eos_token"


@dataclass
class _View:
    model: ServedModel
    request: GenerateRequest
    seed: int | None
    prefix: str
    details: bool
    prefill: bool
    top_n: int = 0
    index: int = 0
    text: str = ""

    def _token(self, token: int, text: str, lp: TokenLogprob | None) -> dict[str, Any]:
        return {"id": token, "text": text, "logprob": lp.logprob if lp else None,
                "special": self.model.is_special(token)}

    def _prefill(self, done: Completion) -> list[dict[str, Any]]:
        if not self.prefill:
            return []
        tokens = self.request.prompt
        assert not isinstance(tokens, str), "TGI requests are tokenized by the server"
        lps = done.prompt_logprobs or (None,) * len(tokens)
        return [{"id": t, "text": self.model.token_text(t), "logprob": lp.logprob if lp else None}
                for t, lp in zip(tokens, lps, strict=True)]

    def sequence(self, done: Completion, seed: int | None) -> dict[str, Any]:
        """TGI's Details (a BestOfSequence has the same fields and the generated text)."""
        lps = done.logprobs or (None,) * len(done.token_ids)
        out: dict[str, Any] = {
            "generated_text": self.prefix + done.text,
            "finish_reason": _finish_reason(done.finish_reason, done.stop_reason),
            "generated_tokens": len(done.token_ids), "seed": seed, "prefill": self._prefill(done),
            "tokens": [self._token(t, self.model.token_text(t), lp) for t, lp in zip(done.token_ids, lps, strict=True)],
        }
        if self.top_n:
            out["top_tokens"] = [self._top(lp) for lp in lps]
        return out

    def _top(self, lp: TokenLogprob | None) -> list[dict[str, Any]]:
        return tgi_top(self.model.engine.runner.piece, lp, self.model.is_special)

    def response(self, done: Completion, seed: int | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = {"generated_text": self.prefix + done.text}
        if self.details:
            details = self.sequence(done, self.seed if seed is None else seed)
            del details["generated_text"]
            answer["details"] = details
        return answer

    def events(self, chunk: GenerationChunk) -> Iterator[dict[str, Any]]:
        """One event per token; a chunk's text rides on its last token, so the texts add up exactly."""
        self.text += chunk.text
        lps = chunk.logprobs or (None,) * len(chunk.token_ids)
        for i, (token, lp) in enumerate(zip(chunk.token_ids, lps, strict=True)):
            last_of_chunk = i == len(chunk.token_ids) - 1
            self.index += 1
            final = chunk.finished and last_of_chunk
            yield {
                "index": self.index, "token": self._token(token, chunk.text if last_of_chunk else "", lp),
                "top_tokens": self._top(lp) if self.top_n else None,
                "generated_text": self.prefix + self.text if final else None,
                "details": self._stream_details(chunk) if final and self.details else None,
            }

    def _stream_details(self, chunk: GenerationChunk) -> dict[str, Any]:
        assert chunk.finish_reason is not None
        return {
            "finish_reason": _finish_reason(chunk.finish_reason, chunk.stop_reason),
            "generated_tokens": self.index, "seed": self.seed, "input_length": chunk.prompt_tokens,
        }


def _check_header(check: SchemaCheck | None, done: Completion) -> dict[str, str]:
    """The check after generation of a JSON grammar (engine/schema_check.py), as a header of JSON: TGI's answer
    has no field for it. Absent when the grammar enforced the whole schema and the output is valid."""
    report = check.report(done.text) if check is not None else None
    return {CHECK_HEADER: json.dumps(report, separators=(",", ":"))} if report is not None else {}


def _headers(done: Completion) -> dict[str, str]:
    """TGI's timing headers, which its clients and dashboards read."""
    headers = {"x-compute-type": "cpu", "x-prompt-tokens": str(done.prompt_tokens),
               "x-generated-tokens": str(len(done.token_ids))}
    if done.timings is not None:
        t = done.timings
        per_token = t.predicted_ms / max(t.predicted_n - 1, 1)
        headers |= {
            "x-queue-time": f"{t.queue_ms:.0f}", "x-inference-time": f"{t.prompt_ms + t.predicted_ms:.0f}",
            "x-time-per-token": f"{per_token:.0f}",
        }
    return headers


async def _events(model: ServedModel, checked: CheckedRequest, view: _View) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in model.stream(checked):
            for event in view.events(chunk):
                yield sse.event(event, tgi=True)
    except Exception as error:  # after the 200 an error can only be an event; never cut the stream silently
        log.warning("stream %s failed: %s", checked.request.request_id, error)
        yield error_event(error, Flavor.TGI)



# -- the Messages API on /invocations ------------------------------------------------------------------


async def respond_messages(body: ChatCompletionRequest, http: Request, state: ServerState) -> Response:
    """TGI's Messages API (SageMaker's /invocations with MESSAGES_API_ENABLED): the chat is rendered and
    generated as on pier's OpenAI route, and answered in TGI's shapes."""
    return await respond_chat(body, http, state, view=MessagesView.of, default_max_tokens=DEFAULT_MAX_NEW_TOKENS)


class MessagesView:
    """TGI 2.0's ChatCompletion and ChatCompletionChunk: `id` empty, `object` "text_completion", the model id,
    `system_fingerprint` "<version>-native", one chunk per generated token.

    With tools, TGI's shapes for calls: a message with `tool_calls` whose ids are their indexes and whose
    `function.arguments` is an object; streamed, one `delta.tool_calls` object per chunk (the call's name first,
    then its arguments' text in fragments), content in chunks of its own, TGI's finish reasons."""

    flavor = Flavor.TGI

    def __init__(self, model: ServedModel, include_usage: bool, logprobs: bool = False,
                 tools: ToolReader | None = None) -> None:
        self.model = model
        self.include_usage = include_usage
        self.logprobs = logprobs
        self.tools = tools
        self.head = {"id": "", "object": "text_completion", "created": int(time.time()), "model": model.name,
                     "system_fingerprint": f"{__version__}-native"}
        self.generated = 0
        self.check: SchemaCheck | None = None  # the response_format's schema, checked on a whole answer

    @classmethod
    def of(cls, model: ServedModel, body: ChatCompletionRequest, tools: ToolSet) -> MessagesView:
        reader = ToolReader(model.tool_format.family, tools) if tools.active else None
        view = cls(model, body.include_usage, bool(body.logprobs), reader)
        view.check = body.schema_check()
        continuation.keep(view.head, "id", "created")  # the same on any copy that continues it
        return view

    def response(self, done: Completion) -> dict[str, Any]:
        choice = {"index": 0, "message": self._message(done.text),
                  "logprobs": self._logprobs(done.token_ids, done.logprobs),
                  "finish_reason": _finish_reason(done.finish_reason, done.stop_reason)}
        report = self.check.report(done.text) if self.check is not None else None
        if report is not None:  # as on pier's OpenAI routes
            choice["schema_check"] = report
        return {**self.head, "created": int(time.time()), "choices": [choice],
                "usage": _usage(done.prompt_tokens, len(done.token_ids))}

    def _message(self, text: str) -> dict[str, Any]:
        parsed = self.tools.whole(text) if self.tools is not None else None
        if parsed is None or not parsed.calls:
            return {"role": "assistant", "content": text}
        calls = [{"id": str(i), "type": "function",
                  "function": {"description": None, "name": c.name, "arguments": json.loads(c.arguments)}}
                 for i, c in enumerate(parsed.calls)]
        return {"role": "assistant", "tool_calls": calls}

    def _logprobs(self, tokens: Sequence[int], lps: Sequence[TokenLogprob | None]) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        return tgi_chat_logprobs(self.model.engine.runner.piece, tokens, lps or (None,) * len(tokens))

    def opening(self) -> list[dict[str, Any]]:
        return []  # TGI's first chunk already carries the first token

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        """One chunk per token; a chunk's text rides on its last token, so the contents add up exactly. The
        token that ends the answer comes last with the finish reason (EOS has no text: content "")."""
        self.generated += len(chunk.token_ids)
        if self.tools is not None:
            return self._tool_chunks(chunk)
        count = len(chunk.token_ids) or (1 if chunk.text or chunk.finished else 0)
        lps = chunk.logprobs or (None,) * len(chunk.token_ids)
        events = []
        for i in range(count):
            last = i == count - 1
            reason = None
            if last and chunk.finish_reason is not None:
                reason = _finish_reason(chunk.finish_reason, chunk.stop_reason)
            logprobs = self._logprobs(chunk.token_ids[i : i + 1], lps[i : i + 1]) if chunk.token_ids else None
            event = {**self.head, "created": int(time.time()), "choices": [{
                "index": 0, "delta": {"role": "assistant", "content": chunk.text if last else ""},
                "logprobs": logprobs, "finish_reason": reason}]}
            if reason is not None and self.include_usage:
                event["usage"] = _usage(chunk.prompt_tokens, self.generated)
            events.append(event)
        return events

    def _tool_chunks(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        assert self.tools is not None
        read = self.tools.push(chunk.text) + (self.tools.finish() if chunk.finished else [])
        events = [self._event(self._delta(event), None) for event in read]
        if chunk.finish_reason is not None:
            last = self._event({"role": "assistant", "content": ""},
                               _finish_reason(chunk.finish_reason, chunk.stop_reason))
            if self.include_usage:
                last["usage"] = _usage(chunk.prompt_tokens, self.generated)
            events.append(last)
        return events

    def _delta(self, event: Event) -> dict[str, Any]:
        if isinstance(event, str):
            return {"role": "assistant", "content": event}
        name, arguments = (event.name, "") if isinstance(event, CallStart) else (None, event.fragment)
        call = {"index": event.index, "id": str(event.index), "type": "function",
                "function": {"name": name, "arguments": arguments}}
        return {"role": "assistant", "tool_calls": call}

    def _event(self, delta: dict[str, Any], reason: str | None) -> dict[str, Any]:
        return {**self.head, "created": int(time.time()),
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]}

    def frame(self, event: dict[str, Any]) -> bytes:
        return sse.event(event, tgi=True)

    def closing(self) -> list[bytes]:
        return []  # TGI 2.0 ends the stream without `data: [DONE]`


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
