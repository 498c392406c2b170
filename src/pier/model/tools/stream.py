"""Tool calls read from an answer while it streams, as OpenAI streams them.

Content goes out as it comes, but for text that may be the start of the family's marker, which is held back until
it is known not to be one (as stop strings are held back). Once the calls begin, each call is announced (its
index, id and name) as soon as its name is whole, and its arguments go out in fragments as they are written. At the
end the whole answer is parsed as a finished one is (`parsers`): if it has no valid calls, what was held back goes
out as content; a call announced and then cut off (max_tokens) is left as it was sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pier.model.tools.families import FORMATS, Family
from pier.model.tools.parsers import PARSERS, Parsed, calls_start, scan


@dataclass(frozen=True)
class CallStart:
    index: int
    name: str


@dataclass(frozen=True)
class CallArguments:
    index: int
    fragment: str


Event = str | CallStart | CallArguments  # a str is content


@dataclass
class _Sent:
    names: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)


class ToolCallStream:
    """One answer's text in, content and call events out."""

    def __init__(self, family: Family, known: Callable[[str], bool], max_calls: int | None = None) -> None:
        self._format = FORMATS[family]
        self._parse = PARSERS[family]
        self._known = known  # whether a name is one of the request's tools
        self._max_calls = max_calls  # parallel_tool_calls false: the first call only
        self._text = ""
        self._content_sent = 0  # how much of the text went out as content
        self._calls_at: tuple[int, int] | None = None  # where the calls' text begins (marker, after it), once it has
        self._sent = _Sent()

    @property
    def calls_sent(self) -> int:
        return len(self._sent.names)

    def push(self, text: str) -> list[Event]:
        self._text += text
        if self._calls_at is None:
            events = self._content()
            if self._calls_at is None:
                return events
            return events + self._calls(final=False)
        return self._calls(final=False)

    def finish(self) -> tuple[list[Event], Parsed]:
        """The events the end of the answer releases, and the answer parsed whole."""
        parsed = self._parse(self._text)
        if not parsed.calls or not all(self._known(c.name) for c in parsed.calls):
            parsed = Parsed(self._text)
        parsed = Parsed(parsed.content, parsed.calls[:self._max_calls])
        if self.calls_sent:
            return (self._calls(final=True) if parsed.calls else []), parsed
        if parsed.calls:
            events: list[Event] = [] if self._calls_at is not None else self._content()
            return events + self._calls(final=True), parsed
        rest = self._text[self._content_sent:]
        self._content_sent = len(self._text)
        return ([rest] if rest else []), parsed

    def _content(self) -> list[Event]:
        start = calls_start(self._text, self._format)
        if start is not None and start[0] >= self._content_sent:
            self._calls_at = start
            return self._release(start[0])
        held = self._undecided()
        return self._release(len(self._text) - held)

    def _undecided(self) -> int:
        """How much of the text's end may still turn out to open the calls."""
        if self._format.bare_json and not self._text.strip():
            return len(self._text)
        for length in range(min(len(self._text), max(len(m) for m in self._format.markers) - 1), 0, -1):
            if any(m.startswith(self._text[-length:]) for m in self._format.markers):
                return length
        return 0

    def _release(self, upto: int) -> list[Event]:
        if upto <= self._content_sent:
            return []
        text = self._text[self._content_sent:upto]
        self._content_sent = upto
        return [text]

    def _calls(self, *, final: bool) -> list[Event]:
        assert self._calls_at is not None
        events: list[Event] = []
        for index, call in enumerate(scan(self._text, self._format, self._calls_at)[:self._max_calls]):
            if index >= self.calls_sent:
                if call.name is None or not call.valid or not self._known(call.name) or index > self.calls_sent:
                    break
                self._sent.names.append(call.name)
                self._sent.arguments.append("")
                events.append(CallStart(index, call.name))
            sent = self._sent.arguments[index]
            arguments = call.arguments if (call.complete or final or call.arguments.startswith("{")) else ""
            if len(arguments) > len(sent) and arguments.startswith(sent):
                events.append(CallArguments(index, arguments[len(sent):]))
                self._sent.arguments[index] = arguments
        return events
