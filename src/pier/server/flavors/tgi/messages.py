"""TGI's Messages API, as SageMaker's /invocations serves it (MESSAGES_API_ENABLED): the chat is rendered and
generated as on pier's OpenAI route, and answered in TGI 2.0's shapes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from pier import __version__
from pier.dialect import Dialect
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import GenerationChunk
from pier.engine.schema_check import SchemaCheck
from pier.model.tools.reader import ToolReader
from pier.model.tools.stream import CallStart, Event
from pier.model.tools.tool_spec import ToolSet
from pier.server import sse
from pier.server.errors import error_event
from pier.server.flavors.logprob_views import tgi_chat_logprobs
from pier.server.flavors.openai.requests import ChatCompletionRequest
from pier.server.flavors.openai.spec import ChatSpec
from pier.server.flavors.openai.views import usage
from pier.server.flavors.tgi.requests import DEFAULT_MAX_NEW_TOKENS
from pier.server.flavors.tgi.views import finish_reason
from pier.server.generation import Completion
from pier.server.pipeline import View
from pier.server.served_model import ServedModel


def messages_spec(body: ChatCompletionRequest) -> ChatSpec:
    """A Messages API chat: at most 100 new tokens by default, as on TGI payloads."""
    return ChatSpec(body, view=MessagesView.of, default_max_tokens=DEFAULT_MAX_NEW_TOKENS)


class MessagesView:
    """TGI 2.0's ChatCompletion and ChatCompletionChunk: `id` empty, `object` "text_completion", the model id,
    `system_fingerprint` "<version>-native", one chunk per generated token.

    With tools, TGI's shapes for calls: a message with `tool_calls` whose ids are their indexes and whose
    `function.arguments` is an object; streamed, one `delta.tool_calls` object per chunk (the call's name first,
    then its arguments' text in fragments), content in chunks of its own, TGI's finish reasons."""

    dialect = Dialect.TGI

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
        return view

    def response(self, done: Completion) -> dict[str, Any]:
        choice = {"index": 0, "message": self._message(done.text),
                  "logprobs": self._logprobs(done.token_ids, done.logprobs),
                  "finish_reason": finish_reason(done.finish_reason, done.stop_reason)}
        report = self.check.report(done.text) if self.check is not None else None
        if report is not None:  # as on pier's OpenAI routes
            choice["schema_check"] = report
        return {**self.head, "created": int(time.time()), "choices": [choice],
                "usage": usage(done.prompt_tokens, len(done.token_ids))}

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
                reason = finish_reason(chunk.finish_reason, chunk.stop_reason)
            logprobs = self._logprobs(chunk.token_ids[i : i + 1], lps[i : i + 1]) if chunk.token_ids else None
            event = {**self.head, "created": int(time.time()), "choices": [{
                "index": 0, "delta": {"role": "assistant", "content": chunk.text if last else ""},
                "logprobs": logprobs, "finish_reason": reason}]}
            if reason is not None and self.include_usage:
                event["usage"] = usage(chunk.prompt_tokens, self.generated)
            events.append(event)
        return events

    def _tool_chunks(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        assert self.tools is not None
        read = self.tools.push(chunk.text) + (self.tools.finish() if chunk.finished else [])
        events = [self._event(self._delta(event), None) for event in read]
        if chunk.finish_reason is not None:
            last = self._event({"role": "assistant", "content": ""},
                               finish_reason(chunk.finish_reason, chunk.stop_reason))
            if self.include_usage:
                last["usage"] = usage(chunk.prompt_tokens, self.generated)
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

    def totals(self, views: Sequence[View]) -> list[dict[str, Any]]:
        return []  # one choice only (n must be 1)

    def frame(self, event: dict[str, Any]) -> bytes:
        return sse.event(event, tgi=True)

    def closing(self) -> list[bytes]:
        return []  # TGI 2.0 ends the stream without `data: [DONE]`

    def failure(self, error: BaseException) -> bytes:
        return error_event(error, self.dialect)
