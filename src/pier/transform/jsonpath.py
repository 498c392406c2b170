"""The JSONPath subset SageMaker's DataProcessing filters use, pure: `$`, `.name`, `['name']`, `['a','b']`,
`[n]`, `[n,m]`, `[a:b]`, `.*` and `[*]`, in any sequence (`$.features[1:]`, `$['id','SageMakerOutput']`).

A path of names and single indexes picks one value; a path with a slice, a list or a wildcard picks several,
gathered as SageMaker gathers them: names from an object make an object of those members, the rest a list."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"\.([A-Za-z_$][\w$-]*|\*)")
_BRACKET = re.compile(r"\[([^\]]*)\]")
_INDEX = re.compile(r"-?\d+")
_SLICE = re.compile(r"(-?\d*):(-?\d*)")
_QUOTED = re.compile(r"""\s*(?:'([^']*)'|"([^"]*)")\s*""")


class JsonPathError(ValueError):
    """A path outside the subset, or one that does not fit the record it is applied to."""


@dataclass(frozen=True)
class PathPart:
    kind: str  # "names", "indexes", "slice", "all"
    names: tuple[str, ...] = ()
    indexes: tuple[int, ...] = ()
    start: int | None = None
    stop: int | None = None

    @property
    def single(self) -> bool:
        return (self.kind == "names" and len(self.names) == 1) or (self.kind == "indexes" and len(self.indexes) == 1)


@dataclass(frozen=True)
class JsonPath:
    text: str
    steps: tuple[PathPart, ...]

    def select(self, value: Any) -> Any:
        """What the path picks out of `value`; JsonPathError when the value lacks it."""
        return _select(value, self.steps, self.text)


def parse(text: str) -> JsonPath:
    if not text.startswith("$"):
        raise JsonPathError(f"The JSONPath {text!r} must start with '$' (for example $, $.features or $[1:]).")
    steps, at = [], 1
    while at < len(text):
        name, bracket = _NAME.match(text, at), _BRACKET.match(text, at)
        if name:
            steps.append(PathPart("all") if name.group(1) == "*" else PathPart("names", names=(name.group(1),)))
            at = name.end()
        elif bracket:
            steps.append(_bracket(bracket.group(1), text))
            at = bracket.end()
        else:
            raise JsonPathError(f"pier reads JSONPath {text!r} up to {text[:at]!r} only: use .name, ['name'], "
                                "['a','b'], [n], [n,m], [a:b], .* or [*] after '$'.")
    return JsonPath(text, tuple(steps))


def _bracket(inside: str, text: str) -> PathPart:
    inside = inside.strip()
    if inside == "*":
        return PathPart("all")
    if slice_ := _SLICE.fullmatch(inside):
        start, stop = slice_.groups()
        return PathPart("slice", start=int(start) if start else None, stop=int(stop) if stop else None)
    parts = [p for p in inside.split(",")]
    if all(_INDEX.fullmatch(p.strip()) for p in parts):
        return PathPart("indexes", indexes=tuple(int(p) for p in parts))
    quoted = [_QUOTED.fullmatch(p) for p in parts]
    if all(quoted):
        return PathPart("names", names=tuple(q.group(1) if q.group(1) is not None else q.group(2)
                                         for q in quoted if q))
    raise JsonPathError(f"[{inside}] in the JSONPath {text!r} is not an index, a slice or quoted names.")


def _select(value: Any, steps: tuple[PathPart, ...], text: str) -> Any:
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if step.single:
        return _select(_one(value, step, text), rest, text)
    if step.kind == "names":
        if not isinstance(value, dict):
            raise JsonPathError(f"{text} picks members of an object, but the record has {_kind(value)} there.")
        return {name: _select(_one(value, PathPart("names", names=(name,)), text), rest, text) for name in step.names}
    return [_select(item, rest, text) for item in _many(value, step, text)]


def _one(value: Any, step: PathPart, text: str) -> Any:
    if step.kind == "names":
        if not isinstance(value, dict) or step.names[0] not in value:
            raise JsonPathError(f"{text}: the record has no member {step.names[0]!r} there ({_kind(value)}).")
        return value[step.names[0]]
    if not isinstance(value, list) or not -len(value) <= step.indexes[0] < len(value):
        raise JsonPathError(f"{text}: the record has no item [{step.indexes[0]}] there ({_kind(value)}).")
    return value[step.indexes[0]]


def _many(value: Any, step: PathPart, text: str) -> list[Any]:
    if step.kind == "all":
        if isinstance(value, dict):
            return list(value.values())
        if isinstance(value, list):
            return value
    elif isinstance(value, list):
        if step.kind == "slice":
            return value[step.start : step.stop]
        return [_one(value, PathPart("indexes", indexes=(i,)), text) for i in step.indexes]
    raise JsonPathError(f"{text} picks items of an array, but the record has {_kind(value)} there.")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    return f"the value {value!r}"[:80]
