"""A regular expression as a GBNF grammar whose sentences are exactly the strings the expression matches whole
(TGI's `{"type": "regex"}` grammar: the output is one full match).

Python's own regex parser reads the pattern, so the syntax is Python's (which TGI users write: classes, ranges,
groups, alternation, quantifiers, `\\d \\w \\s` and their negations). Classes are ASCII: `\\d` is [0-9], `\\w`
[A-Za-z0-9_], and `\\D \\W \\S` are the ASCII characters outside them, so every output matches under any regex
engine's reading. What a grammar cannot express is refused by name: lookarounds, backreferences, word
boundaries, anchors inside the pattern, inline flags.
"""

from __future__ import annotations

import json
import re
from re import _constants as sre  # type: ignore[attr-defined]  # Python's own regex parser (3.11+)
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

from pier.errors import InvalidRequest

_DIGIT = [(0x30, 0x39)]
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_SPACE = [(0x09, 0x0D), (0x20, 0x20)]
_ANY_SPACE = [(0x09, 0x0D), (0x1C, 0x20)]  # Python's Unicode \s also takes the separators U+001C-U+001F
_CATEGORIES: dict[Any, tuple[list[tuple[int, int]], bool]] = {  # ranges, negated (within ASCII)
    sre.CATEGORY_DIGIT: (_DIGIT, False), sre.CATEGORY_NOT_DIGIT: (_DIGIT, True),
    sre.CATEGORY_WORD: (_WORD, False), sre.CATEGORY_NOT_WORD: (_WORD, True),
    sre.CATEGORY_SPACE: (_SPACE, False), sre.CATEGORY_NOT_SPACE: (_ANY_SPACE, True),
}
_JSON_UNSAFE = r'\x22\x5C\x00-\x1F'  # what a JSON string holds only escaped
_REFUSED = {
    sre.ASSERT: "lookahead/lookbehind `(?=...)`, `(?<=...)`", sre.ASSERT_NOT: "negative lookaround `(?!...)`",
    sre.GROUPREF: "backreference `\\1`", sre.GROUPREF_EXISTS: "conditional group `(?(1)...)`",
}


class UnsupportedRegex(InvalidRequest):
    """A pattern that cannot be a grammar."""


def regex_to_gbnf(pattern: str, param: str = "grammar") -> str:
    """GBNF (rule `root`) for the strings `pattern` matches whole. Raises UnsupportedRegex saying what to change."""
    return f"root ::= {regex_expression(pattern, param)}"


def regex_expression(pattern: str, param: str = "grammar", *, json_string: bool = False) -> str:
    """GBNF expression for the strings `pattern` matches whole; with `json_string`, as they are written inside a
    JSON string (a `"` or `\\` the pattern names literally is escaped; classes and `.` leave out `"`, `\\` and
    control characters, which JSON would need escaped)."""
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, OverflowError) as e:
        raise UnsupportedRegex(f"The regex {pattern!r} does not parse: {e}.", param=param) from None
    except RecursionError:
        raise UnsupportedRegex("The regex nests groups too deeply; flatten it.", param=param) from None
    try:
        return _root(parsed, pattern, param, json_string)
    except RecursionError:
        raise UnsupportedRegex("The regex nests groups too deeply; flatten it.", param=param) from None


def _root(parsed: Any, pattern: str, param: str, json_string: bool) -> str:
    if parsed.state.flags & ~(re.UNICODE | re.U):
        raise UnsupportedRegex(f"The regex {pattern!r} sets inline flags (like `(?i)`), which a grammar cannot "
                               "follow; spell the alternatives out ([Aa]).", param=param)
    items = list(parsed)
    if items and items[0] in ((sre.AT, sre.AT_BEGINNING), (sre.AT, sre.AT_BEGINNING_STRING)):
        items = items[1:]
    if items and items[-1][0] is sre.AT and items[-1][1] in (sre.AT_END, sre.AT_END_STRING):
        items = items[:-1]
    return _sequence(items, pattern, param, json_string)


def _sequence(items: list[tuple[Any, Any]], pattern: str, param: str, json_string: bool = False) -> str:
    parts = [_item(op, arg, pattern, param, json_string) for op, arg in items]
    return " ".join(parts) if parts else '""'


def _item(op: Any, arg: Any, pattern: str, param: str, json_string: bool) -> str:
    if op is sre.LITERAL:
        return _json_literal(arg) if json_string else f'"{_escape(arg)}"'
    if op is sre.NOT_LITERAL:
        return f"[^{_escape(arg)}{_JSON_UNSAFE if json_string else ''}]"
    if op is sre.ANY:
        return f"[^\\n{_JSON_UNSAFE}]" if json_string else "[^\\n]"
    if op is sre.IN:
        return _charset(arg, json_string)
    if op is sre.BRANCH:
        return "(" + " | ".join(_sequence(list(alt), pattern, param, json_string) for alt in arg[1]) + ")"
    if op is sre.SUBPATTERN:
        add_flags, del_flags = arg[1], arg[2]
        if add_flags or del_flags:
            raise UnsupportedRegex(f"The regex {pattern!r} sets flags in a group; a grammar cannot follow them.",
                                   param=param)
        return "(" + _sequence(list(arg[3]), pattern, param, json_string) + ")"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", sre.MAX_REPEAT)):
        low, high, body = arg
        return "(" + _sequence(list(body), pattern, param, json_string) + ")" + _times(low, high)
    if op is getattr(sre, "ATOMIC_GROUP", None):
        return "(" + _sequence(list(arg), pattern, param, json_string) + ")"
    if op is sre.AT:
        what = "a word boundary `\\b`" if arg in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY) else "an anchor (^ or $)"
        raise UnsupportedRegex(f"The regex {pattern!r} has {what} inside it; the whole output matches the "
                               "pattern, so anchors may only begin and end it. Remove it.", param=param)
    name = _REFUSED.get(op, str(op).lower())
    raise UnsupportedRegex(f"The regex {pattern!r} uses {name}, which a grammar cannot express; rewrite the "
                           "pattern without it.", param=param)


def _times(low: int, high: int) -> str:
    if (low, high) == (0, sre.MAXREPEAT):
        return "*"
    if (low, high) == (1, sre.MAXREPEAT):
        return "+"
    if (low, high) == (0, 1):
        return "?"
    if high == sre.MAXREPEAT:
        return f"{{{low},}}"
    return f"{{{low}}}" if low == high else f"{{{low},{high}}}"


def _charset(items: list[tuple[Any, Any]], json_string: bool = False) -> str:
    negate = bool(items) and items[0][0] is sre.NEGATE
    ranges: list[tuple[int, int]] = []
    for op, arg in items[1:] if negate else items:
        if op is sre.LITERAL:
            ranges.append((arg, arg))
        elif op is sre.RANGE:
            ranges.append(arg)
        elif op is sre.CATEGORY:
            members, negated = _CATEGORIES[arg]
            ranges.extend(_ascii_complement(members) if negated else members)
        else:  # pragma: no cover - sre_parse produces nothing else inside a class
            raise UnsupportedRegex(f"Unsupported item in a character class: {op}.")
    if json_string and negate:
        return "[^" + _ranges(ranges) + _JSON_UNSAFE + "]"
    if json_string:
        return _json_charset(ranges)
    return f"[{'^' if negate else ''}{_ranges(ranges)}]"


def _ranges(ranges: list[tuple[int, int]]) -> str:
    return "".join(_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in ranges)


def _json_charset(ranges: list[tuple[int, int]]) -> str:
    """A class inside a JSON string: its JSON-safe characters as a class, the others as their escapes."""
    safe: list[tuple[int, int]] = []
    escaped: list[str] = []
    for a, b in ranges:
        start = a
        for code in range(a, min(b, 0x5C) + 1):  # the unsafe ones all lie at or below `\\` (0x5C)
            if code < 0x20 or code in (0x22, 0x5C):
                if start < code:
                    safe.append((start, code - 1))
                escaped.append(_json_literal(code))
                start = code + 1
        if start <= b:
            safe.append((start, b))
    alternatives = ([f"[{_ranges(safe)}]"] if safe else []) + sorted(set(escaped))
    return alternatives[0] if len(alternatives) == 1 else "(" + " | ".join(alternatives) + ")"


def _json_literal(code: int) -> str:
    """A character as JSON writes it inside a string, as a GBNF literal."""
    return '"' + "".join(_escape(ord(c)) for c in json.dumps(chr(code), ensure_ascii=False)[1:-1]) + '"'


def _ascii_complement(members: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, start = [], 0
    for a, b in sorted(members):
        if a > start:
            out.append((start, a - 1))
        start = b + 1
    if start <= 0x7F:
        out.append((start, 0x7F))
    return out


def _escape(code: int) -> str:
    """A code point as GBNF writes it inside a string or a class: letters and digits as they are, the rest
    escaped, so no character can close or change the construct."""
    char = chr(code)
    if char.isascii() and char.isalnum():
        return char
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"
