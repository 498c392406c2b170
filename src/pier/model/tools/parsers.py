"""Tool calls read out of a finished answer: one parser per family, each a pure function of the text.

An answer is content up to the family's marker (or, for Llama 3.x, a JSON object it starts with), then the calls.
It has calls only if every one of them is whole: a JSON object with a string name and an object of arguments.
Anything else (a call cut off, broken JSON) leaves the whole answer as content, so nothing is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from pier.model.tools.families import FORMATS, Family, Format
from pier.model.tools.json_scan import PartialCall, calls_in, tagged_calls


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text of an object, as the model wrote it


@dataclass(frozen=True)
class Parsed:
    content: str | None  # None when the answer is only calls
    calls: tuple[ToolCall, ...] = ()


def calls_start(text: str, fmt: Format) -> tuple[int, int] | None:
    """Where the calls begin in `text`: (index of the marker, index just past it), or None."""
    found = [(i, i + len(m)) for m in fmt.markers if (i := text.find(m)) != -1]
    if fmt.bare_json:
        body = len(text) - len(text.lstrip())
        if text[body:body + 1] == "{":
            found.append((body, body))
    return min(found) if found else None


def scan(text: str, fmt: Format, start: tuple[int, int]) -> list[PartialCall]:
    """The calls from where they begin (`calls_start`), as far as the text goes."""
    return tagged_calls(text, start[0]) if fmt.tagged else calls_in(text, start[1])


def whole_calls(partials: list[PartialCall]) -> tuple[ToolCall, ...] | None:
    """The calls, if every one is whole and its arguments an object; else None."""
    calls = []
    for call in partials:
        if not call.whole or call.name is None:
            return None
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            return None
        if not isinstance(arguments, dict):
            return None
        calls.append(ToolCall(call.name, call.arguments))
    return tuple(calls) or None


def parse(text: str, family: Family) -> Parsed:
    """A finished answer in `family`'s format: content, then the calls when every one is whole."""
    fmt = FORMATS[family]
    start = calls_start(text, fmt)
    if start is None:
        return Parsed(text)
    calls = whole_calls(scan(text, fmt, start))
    if calls is None:
        return Parsed(text)
    content = text[:start[0]]  # as a stream sends it; None when there is nothing to read
    return Parsed(content if content.strip() else None, calls)


# One parser per family: the same reading over each family's format.
PARSERS: dict[Family, Callable[[str], Parsed]] = {family: partial(parse, family=family) for family in FORMATS}
