"""Reading JSON call objects out of text that may stop anywhere (a stream's text so far).

`call_at(text, i)` reads the object starting at `text[i]` key by key and reports what is known so far: the
function's name once its string is whole, and the raw text of its arguments so far. The arguments' text only ever
grows as more text comes, so a stream can send each new part of it as it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

NAME_KEYS = ("name", "tool_name")  # Command R7B writes tool_name
ARGUMENT_KEYS = ("arguments", "parameters")  # Llama 3.x and Command R7B write parameters
_LITERAL = frozenset("0123456789+-.eEtruefalsn")


@dataclass(frozen=True)
class PartialCall:
    """One call as far as the text goes. `arguments` is JSON text of an object, whole when `complete`."""

    name: str | None
    arguments: str
    complete: bool  # the call's object closed
    end: int  # where its text ends (the end of the text when incomplete)
    valid: bool = True  # its arguments are an object (or a string holding one), its name a string

    @property
    def whole(self) -> bool:
        return self.complete and self.valid and self.name is not None


def value_end(text: str, i: int) -> int | None:
    """The index just past the JSON value starting at `text[i]`, or None if the text ends before it does."""
    if i >= len(text):
        return None
    first = text[i]
    if first == '"':
        return _string_end(text, i)
    if first in "{[":
        return _nested_end(text, i)
    j = i
    while j < len(text) and text[j] in _LITERAL:
        j += 1
    return j if j < len(text) and j > i else None  # "12" could still become "123"


def _string_end(text: str, i: int) -> int | None:
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            return j + 1
        j += 1
    return None


def _nested_end(text: str, i: int) -> int | None:
    depth = 0
    j = i
    while j < len(text):
        c = text[j]
        if c == '"':
            end = _string_end(text, j)
            if end is None:
                return None
            j = end
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return None


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def call_at(text: str, i: int) -> PartialCall:
    """The call object starting at `text[i]` (which is "{"), read as far as the text goes."""
    name: str | None = None
    arguments = ""
    args_whole = False
    valid = True
    j = i + 1
    while True:
        j = _skip_space(text, j)
        if j >= len(text):
            return PartialCall(name, arguments, False, len(text), valid)
        if text[j] == "}":
            return PartialCall(name, arguments if args_whole else "{}", True, j + 1, valid and name is not None)
        if text[j] == ",":
            j += 1
            continue
        key_end = _string_end(text, j) if text[j] == '"' else None
        if key_end is None:
            return PartialCall(name, arguments, False, len(text), valid and text[j] == '"')
        key = json.loads(text[j:key_end])
        j = _skip_space(text, key_end)
        if j >= len(text):
            return PartialCall(name, arguments, False, len(text), valid)
        if text[j] != ":":
            return PartialCall(name, arguments, False, len(text), False)
        j = _skip_space(text, j + 1)
        end = value_end(text, j)
        if key in ARGUMENT_KEYS and j < len(text) and text[j] == "{":
            arguments = text[j:end] if end is not None else text[j:]
            args_whole = end is not None
        elif key in ARGUMENT_KEYS and end is not None:
            arguments, ok = _string_arguments(text[j:end])
            args_whole, valid = ok, valid and ok
        elif key in NAME_KEYS and end is not None:
            value = json.loads(text[j:end]) if text[j] == '"' else None
            name, valid = (value, valid) if isinstance(value, str) else (name, False)
        if end is None:
            return PartialCall(name, arguments, False, len(text), valid)
        j = end


def _string_arguments(raw: str) -> tuple[str, bool]:
    """Arguments some models write as a string of JSON (OpenAI's own wire shape): its object's text."""
    try:
        value = json.loads(raw)
    except ValueError:
        return "", False
    if isinstance(value, str):
        try:
            inner = json.loads(value)
        except ValueError:
            return "", False
        return (value, True) if isinstance(inner, dict) else ("", False)
    return "", False


_TAG = "<function="


def tagged_calls(text: str, start: int = 0) -> list[PartialCall]:
    """Every `<function=NAME>{arguments}</function>` call in `text[start:]`; the last may be incomplete (its name
    is known once its tag closes)."""
    calls: list[PartialCall] = []
    j = start
    while True:
        j = text.find(_TAG, j)
        if j == -1:
            return calls
        close = text.find(">", j + len(_TAG))
        if close == -1:
            calls.append(PartialCall(None, "", False, len(text)))
            return calls
        name = text[j + len(_TAG):close]
        k = _skip_space(text, close + 1)
        if k >= len(text):
            calls.append(PartialCall(name, "", False, len(text)))
            return calls
        if text[k] != "{":
            calls.append(PartialCall(name, "", True, k, valid=False))
            return calls
        end = value_end(text, k)
        calls.append(PartialCall(name, text[k:end] if end is not None else text[k:], end is not None,
                                 end if end is not None else len(text)))
        if end is None:
            return calls
        j = end


def calls_in(text: str, start: int = 0) -> list[PartialCall]:
    """Every call object in `text[start:]`, outside any other JSON: what lies between them (tags, commas, an
    array's brackets) is skipped. The last may be incomplete."""
    calls: list[PartialCall] = []
    j = start
    while True:
        j = text.find("{", j)
        if j == -1:
            return calls
        call = call_at(text, j)
        calls.append(call)
        if not call.complete:
            return calls
        j = call.end
