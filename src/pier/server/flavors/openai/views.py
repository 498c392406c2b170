"""The OpenAI API's answers: a chat completion or a text completion, whole or in chunks, with logprobs, tool
calls and the schema check; llama.cpp-style `timings` ride along in every final response."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeVar

from pier import __version__
from pier.dialect import Dialect
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerationChunk
from pier.engine.schema_check import SchemaCheck
from pier.model.tools.reader import ToolReader
from pier.model.tools.stream import CallStart, Event
from pier.model.tools.tool_spec import ToolSet
from pier.server import sse
from pier.server.errors import error_event
from pier.server.flavors.logprob_views import CompletionLogprobs, Piece, chat_logprobs, merged
from pier.server.flavors.openai.requests import ChatCompletionRequest
from pier.server.generation import Completion
from pier.server.pipeline import View
from pier.server.served_model import ServedModel

_FINISH = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}


Output = TypeVar("Output", GenerationChunk, Completion)


def without_output(output: Output) -> Output:
    """A chunk or a completion with what was generated left out, ended by its length (max_tokens 0), as OpenAI
    answers `echo` with max_tokens 0; the prompt's logprobs stay."""
    ended = FinishReason.LENGTH if output.finish_reason is not None else None
    return replace(output, text="", token_ids=(), logprobs=(), finish_reason=ended, stop_reason=None)


def _finish(reason: FinishReason | None, *, called: bool) -> str:
    """`tool_calls` for an answer that ended in calls; but `length` stays, as OpenAI's does, for one that max_tokens
    cut: its last call may be cut off (a stream announced it), and a client runs the calls of `tool_calls`."""
    finish = _FINISH.get(reason, "stop") if reason is not None else "stop"
    return "tool_calls" if called and finish != "length" else finish


class OpenAIView:
    """Shapes one request's output as a chat completion or a text completion, whole or in chunks. With `piece`
    (the runner's token bytes) it writes the log-probabilities too; with `check` (a response_format schema) the
    last choice carries `schema_check` when the schema was checked after generation or the output breaks it."""

    dialect = Dialect.OPENAI

    def __init__(
        self, model: str, *, chat: bool, include_usage: bool, echo: str = "", piece: Piece | None = None,
        prompt: Sequence[int] = (), tools: ToolReader | None = None, check: SchemaCheck | None = None,
        prompt_only: bool = False,
    ) -> None:
        self.chat = chat
        self.prompt_only = prompt_only  # echo with max_tokens 0: what was generated is left out
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
        finish = _finish(done.finish_reason, called=self.chat and bool(choice["message"].get("tool_calls")))
        choice |= {"logprobs": logprobs, "finish_reason": finish}
        report = self.check.report(done.text) if self.check is not None else None
        if report is not None:
            choice["schema_check"] = report
        return {
            **self.head, "object": "chat.completion" if self.chat else "text_completion", "choices": [choice],
            "usage": usage(done.prompt_tokens, len(done.token_ids)),
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
        return [self._chunk(self.echo, None)] if self.echo and not self._echo_waits else []

    @property
    def _echo_waits(self) -> bool:
        """An echo with logprobs goes out with the first chunk, which brings the prompt's logprobs: they ride on
        the chunk whose text is the prompt's, so each chunk's tokens spell its own text."""
        return not self.chat and bool(self.echo) and self.piece is not None

    def _echoed(self, chunk: GenerationChunk) -> dict[str, Any]:
        assert self.piece is not None
        with_prompt = chunk.prompt_logprobs is not None
        self._offsets = CompletionLogprobs(self.piece, 0 if with_prompt else len(self.echo))
        logprobs = self._offsets.add(self.prompt, chunk.prompt_logprobs) if chunk.prompt_logprobs is not None else None
        return self._chunk(self.echo, None, logprobs)

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        if self.prompt_only:
            chunk = without_output(chunk)
        first = self.completion_tokens == 0 and self._offsets is None
        self.prompt_tokens = chunk.prompt_tokens
        self.completion_tokens += len(chunk.token_ids)
        if self.check is not None:
            self.text += chunk.text
        events = []
        if first and self._echo_waits:
            events.append(self._echoed(chunk))
            first = False
        if self.tools is not None:
            events += self._tool_chunks(chunk)
        elif chunk.text or (self.piece is not None and chunk.token_ids):
            logprobs = self._logprobs(chunk.token_ids, chunk.logprobs, chunk.prompt_logprobs, first=first)
            events.append(self._chunk({"content": chunk.text} if self.chat else chunk.text, None, logprobs))
        if chunk.finish_reason is not None:
            finish = _finish(chunk.finish_reason, called=self.tools is not None and self.tools.called)
            last = self._chunk({} if self.chat else "", finish)
            report = self.check.report(self.text) if self.check is not None else None
            if report is not None:
                last["choices"][0]["schema_check"] = report
            last["timings"] = chunk.timings.as_dict() if chunk.timings else None
            events.append(last)
            if self.include_usage:
                events.append({**self.head, "object": self._object, "choices": [],
                               "usage": usage(self.prompt_tokens, self.completion_tokens)})
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

    def totals(self, views: Sequence[View]) -> list[dict[str, Any]]:
        """With include_usage, one usage chunk for all the choices of a stream."""
        if not self.include_usage:
            return []
        generated = sum(v.completion_tokens for v in views if isinstance(v, OpenAIView))
        return [{**self.head, "object": self._object, "choices": [], "usage": usage(self.prompt_tokens, generated)}]

    def frame(self, event: dict[str, Any]) -> bytes:
        return sse.event(event)

    def closing(self) -> list[bytes]:
        return [sse.event("[DONE]")]

    def failure(self, error: BaseException) -> bytes:
        return error_event(error, self.dialect)

    def _chunk(
        self, delta: dict[str, Any] | str, finish_reason: str | None, logprobs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        choice: dict[str, Any] = {"index": 0, "delta": delta} if self.chat else {"index": 0, "text": delta}
        choice |= {"logprobs": logprobs, "finish_reason": finish_reason}
        event = {**self.head, "object": self._object, "choices": [choice]}
        if self.include_usage:
            event["usage"] = None  # OpenAI sends null usage on every chunk but the last when asked for it
        return event


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def chat_view(model: ServedModel, body: ChatCompletionRequest, tools: ToolSet) -> OpenAIView:
    """An OpenAI chat completion's view (pier's /v1 routes)."""
    piece = model.engine.runner.piece if body.logprobs else None
    return OpenAIView(body.model or model.name, chat=True, include_usage=body.include_usage, piece=piece,
                      tools=ToolReader(model.tool_format.family, tools) if tools.active else None,
                      check=body.schema_check())
