"""The OpenAI Responses API's answers: a `response` object, whole or as its stream of typed events.

The output is a list of items: the assistant's message (one `output_text` part) and the function calls it makes,
in the order the model wrote them. A stream opens each item when its first piece arrives and closes it when the
next begins or the answer ends, each event numbered (`sequence_number`) and named in an `event:` line as
OpenAI's are.

A stream resumed on another copy (server/resumable_answers.py) reads on as one: the response's id, creation time and
the next event number are kept in the head (`KEPT`), item and call ids follow from the response's id, and the
events one chunk makes go out in one frame, so a resume never leaves a client with half of them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pier.dialect import Dialect
from pier.engine.logprobs import TokenLogprob
from pier.engine.request import FinishReason, GenerationChunk
from pier.model.tools.reader import ToolReader
from pier.model.tools.stream import CallStart, Event
from pier.model.tools.tool_spec import ToolSet
from pier.server.errors import error_body
from pier.server.flavors.logprob_views import Piece, chat_logprobs
from pier.server.flavors.openai.requests import ChatCompletionRequest
from pier.server.flavors.openai.response_request import ResponseRequest
from pier.server.generation import Completion
from pier.server.pipeline import View
from pier.server.served_model import ServedModel

SEQUENCE = "sequence_number"  # the head's count of events sent: the next event's number
GROUP = "events"  # what chunk() returns: one chunk's events, framed together


@dataclass
class _Item:
    """One output item being streamed: the message, or a function call."""

    body: dict[str, Any]
    index: int
    text: str = ""
    logprobs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def is_message(self) -> bool:
        return self.body["type"] == "message"


class ResponseView:
    """Shapes one request's output as a `response`; `echo` holds the request's settings the response repeats."""

    dialect = Dialect.OPENAI

    def __init__(self, model: str, body: ResponseRequest, tools: ToolReader | None, piece: Piece | None) -> None:
        self.head: dict[str, Any] = {"id": f"resp_{uuid.uuid4().hex}", "created_at": int(time.time()), SEQUENCE: 0}
        self.model = model
        self.body = body
        self.tools = tools
        self.piece = piece
        self.items: list[dict[str, Any]] = []  # the output items a stream has closed
        self._open: _Item | None = None
        self.prompt_tokens = 0
        self.completion_tokens = 0

    @classmethod
    def of(cls, body: ResponseRequest) -> Callable[[ServedModel, ChatCompletionRequest, ToolSet], ResponseView]:
        """The view factory ChatSpec takes (model, chat body, tools)."""
        def make(model: ServedModel, _chat: ChatCompletionRequest, tools: ToolSet) -> ResponseView:
            reader = ToolReader(model.tool_format.family, tools) if tools.active else None
            piece = model.engine.runner.piece if body.logprobs else None
            return cls(body.model or model.name, body, reader, piece)
        return make

    # -- the whole answer -------------------------------------------------------------------------------

    def response(self, done: Completion) -> dict[str, Any]:
        parsed = self.tools.whole(done.text) if self.tools is not None else None
        content = parsed.content if parsed is not None else done.text
        calls = parsed.calls if parsed is not None else []
        status = _status(done.finish_reason)
        output = []
        if content or not calls:
            logprobs = self._logprobs(done.token_ids, done.logprobs)
            output.append(self._message(0, status, content or "", logprobs))
        for k, call in enumerate(calls):
            output.append(self._call(len(output), k, call.name, call.arguments, status="completed"))
        cached = done.timings.cached_n if done.timings is not None else 0
        return self._response(status, output, _usage(done.prompt_tokens, len(done.token_ids), cached))

    # -- the stream --------------------------------------------------------------------------------------

    def opening(self) -> list[dict[str, Any]]:
        shell = self._response("in_progress", [], None)
        # A head that already counts events was restored from the copy that began this stream: the client has
        # these two, and what this copy writes for them is dropped.
        quiet = self.head[SEQUENCE] > 0
        return self._group([_event("response.created", response=shell),
                            _event("response.in_progress", response=shell)], quiet=quiet)

    def chunk(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        self.prompt_tokens = chunk.prompt_tokens or self.prompt_tokens
        self.completion_tokens += len(chunk.token_ids)
        logprobs = self._logprobs(chunk.token_ids, chunk.logprobs) if chunk.token_ids else []
        if self.tools is not None:
            read = self.tools.push(chunk.text) + (self.tools.finish() if chunk.finished else [])
        else:
            read = [chunk.text] if chunk.text else []
        events: list[dict[str, Any]] = []
        for i, piece in enumerate(read):
            events += self._read(piece, logprobs if i == 0 else [])
        if not read and logprobs and self._open is not None and self._open.is_message:
            self._open.logprobs += logprobs  # tokens whose text is held back still count their logprobs
        if chunk.finish_reason is not None:
            events += self._end(chunk)
        return self._group(events, quiet=chunk.replayed)

    def _read(self, piece: Event, logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if isinstance(piece, str):
            events = [] if self._open is not None and self._open.is_message else self._switch(self._new_message())
            item = self._open
            assert item is not None
            item.text += piece
            item.logprobs += logprobs
            return [*events, _event("response.output_text.delta", item_id=item.body["id"], output_index=item.index,
                                    content_index=0, delta=piece, logprobs=logprobs)]
        if isinstance(piece, CallStart):
            return self._switch(self._new_call(piece))
        item = self._open
        assert item is not None and not item.is_message, "a call's arguments follow its start"
        item.text += piece.fragment
        return [_event("response.function_call_arguments.delta", item_id=item.body["id"], output_index=item.index,
                       delta=piece.fragment)]

    def _new_message(self) -> _Item:
        index = len(self.items)
        return _Item(self._message(index, "in_progress", None, None), index)

    def _new_call(self, start: CallStart) -> _Item:
        index = len(self.items)
        return _Item(self._call(index, start.index, start.name, "", status="in_progress"), index)

    def _switch(self, item: _Item) -> list[dict[str, Any]]:
        """Close the open item and open `item`."""
        events = self._close("completed")
        self._open = item
        events.append(_event("response.output_item.added", output_index=item.index, item=item.body))
        if item.is_message:
            events.append(_event("response.content_part.added", item_id=item.body["id"], output_index=item.index,
                                 content_index=0, part=_text_part("", None)))
        return events

    def _close(self, status: str) -> list[dict[str, Any]]:
        item, self._open = self._open, None
        if item is None:
            return []
        where = {"item_id": item.body["id"], "output_index": item.index}
        if item.is_message:
            part = _text_part(item.text, item.logprobs if self.piece is not None else None)
            done = {**item.body, "status": status, "content": [part]}
            events = [_event("response.output_text.done", **where, content_index=0, text=item.text,
                             logprobs=item.logprobs),
                      _event("response.content_part.done", **where, content_index=0, part=part)]
        else:
            done = {**item.body, "status": "completed", "arguments": item.text}
            events = [_event("response.function_call_arguments.done", **where, name=done["name"],
                             arguments=item.text)]
        self.items.append(done)
        return [*events, _event("response.output_item.done", output_index=item.index, item=done)]

    def _end(self, chunk: GenerationChunk) -> list[dict[str, Any]]:
        status = _status(chunk.finish_reason)
        nothing = self._open is None and not self.items  # nothing was written: the answer is an empty message
        events = [*(self._switch(self._new_message()) if nothing else []), *self._close(status)]
        cached = chunk.timings.cached_n if chunk.timings is not None else 0
        final = self._response(status, self.items, _usage(self.prompt_tokens, self.completion_tokens, cached))
        return [*events, _event(f"response.{status}", response=final)]

    def _group(self, events: list[dict[str, Any]], *, quiet: bool) -> list[dict[str, Any]]:
        """Number the events; those written again for a resumed stream (`quiet`) do not count."""
        number = self.head[SEQUENCE]
        for event in events:
            event[SEQUENCE] = number
            number += 1
        if not quiet:
            self.head[SEQUENCE] = number
        return [{GROUP: events}] if events else []

    def totals(self, views: Sequence[View]) -> list[dict[str, Any]]:
        return []  # one choice only

    def frame(self, group: dict[str, Any]) -> bytes:
        return b"".join(_sse(event) for event in group[GROUP])

    def closing(self) -> list[bytes]:
        return []  # a Responses stream ends with its response.completed event, without [DONE]

    def failure(self, error: BaseException) -> bytes:
        """An error after the stream began: OpenAI's `error` event."""
        _, body = error_body(error, self.dialect)
        problem = body.get("error", {})
        event = {"type": "error", "code": problem.get("code"), "message": problem.get("message", str(error)),
                 "param": problem.get("param"), SEQUENCE: self.head[SEQUENCE]}
        self.head[SEQUENCE] += 1
        return _sse(event)

    # -- shapes ------------------------------------------------------------------------------------------

    def _message(self, index: int, status: str, text: str | None, logprobs: list[dict[str, Any]] | None
                 ) -> dict[str, Any]:
        content = [] if text is None else [_text_part(text, logprobs)]
        return {"id": f"msg_{self._base}{index:04d}", "type": "message", "status": status, "role": "assistant",
                "content": content}

    def _call(self, index: int, call: int, name: str, arguments: str, *, status: str) -> dict[str, Any]:
        call_id = self.tools.call_id(self.head["id"], call) if self.tools is not None else f"call_{call}"
        return {"id": f"fc_{self._base}{index:04d}", "type": "function_call", "status": status, "call_id": call_id,
                "name": name, "arguments": arguments}

    @property
    def _base(self) -> str:
        return str(self.head["id"]).removeprefix("resp_")

    def _logprobs(self, tokens: Sequence[int], lps: Sequence[TokenLogprob | None]) -> list[dict[str, Any]]:
        if self.piece is None:
            return []
        return list(chat_logprobs(self.piece, tokens, lps or (None,) * len(tokens))["content"])

    def _response(self, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
        body = self.body
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.head["id"], "object": "response", "created_at": self.head["created_at"], "status": status,
            "completed_at": int(time.time()) if status == "completed" else None, "error": None,
            "incomplete_details": incomplete, "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens, "model": self.model, "output": output,
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": None, "reasoning": body.reasoning, "store": False,
            "temperature": body.temperature, "top_p": body.top_p, "top_logprobs": body.top_logprobs,
            "text": {"format": (body.text.format if body.text is not None else None) or {"type": "text"}},
            "tool_choice": body.tool_choice or "auto", "tools": body.tools or [], "truncation": "disabled",
            "metadata": body.metadata or {}, "usage": usage, "background": False,
        }


def _status(reason: FinishReason | None) -> str:
    return "incomplete" if reason is FinishReason.LENGTH else "completed"


def _text_part(text: str, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = logprobs
    return part


def _usage(prompt: int, output: int, cached: int) -> dict[str, Any]:
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + output}


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


def _sse(event: dict[str, Any]) -> bytes:
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()
