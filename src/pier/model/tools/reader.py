"""One chat answer read for tool calls, whole or as it streams: what the flavors' views use."""

from __future__ import annotations

import hashlib

from pier.model.tools.families import Family
from pier.model.tools.parsers import PARSERS, Parsed
from pier.model.tools.stream import Event, ToolCallStream
from pier.model.tools.tool_spec import ToolSet


def call_id(answer_id: str, index: int, choice: int = 0) -> str:
    """A call's id, the same from every copy that continues the answer (it follows the answer's id), distinct
    across the answer's choices."""
    return "call_" + hashlib.sha256(f"{answer_id}/{choice}/{index}".encode()).hexdigest()[:24]


class ToolReader:
    """Reads calls of the request's tools out of the answer, in the model's family; with no active tools the
    answer is all content."""

    def __init__(self, family: Family, tools: ToolSet) -> None:
        self.active = tools.active
        self._family = family
        self._names = tools.names()
        self._max_calls = None if tools.choice.parallel else 1  # parallel_tool_calls false: the first call only
        self._stream = ToolCallStream(family, self._names.__contains__, self._max_calls)
        self.called = False  # the streamed answer had calls
        self.choice = 0  # which of the answer's choices this one is (n > 1)

    def call_id(self, answer_id: str, index: int) -> str:
        return call_id(answer_id, index, self.choice)

    def whole(self, text: str) -> Parsed:
        if not self.active:
            return Parsed(text)
        parsed = PARSERS[self._family](text)
        if parsed.calls and all(c.name in self._names for c in parsed.calls):
            return Parsed(parsed.content, parsed.calls[:self._max_calls])
        return Parsed(text)

    def push(self, text: str) -> list[Event]:
        if not self.active:
            return [text] if text else []
        return self._stream.push(text) if text else []

    def finish(self) -> list[Event]:
        if not self.active:
            return []
        events, parsed = self._stream.finish()
        self.called = bool(parsed.calls) or self._stream.calls_sent > 0
        return events
