"""The tools of a request and its `tool_choice`, checked once (OpenAI's shapes; TGI's are the same).

A bad tool is a 400 naming the tool and how to fix it; a schema that is not a JSON schema is refused here, so a
grammar is only ever built from valid schemas.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import jsonschema

from pier.errors import InvalidRequest

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
EMPTY_PARAMETERS: Mapping[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Tool:
    """One function the model may call."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(EMPTY_PARAMETERS))

    def as_openai(self) -> dict[str, Any]:
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters)
        return {"type": "function", "function": function}


class Mode(StrEnum):
    AUTO = "auto"  # the model decides: text, or calls that are parsed afterwards
    NONE = "none"  # no calls: the tools are not even shown to the model
    REQUIRED = "required"  # one or more calls, forced by a grammar


@dataclass(frozen=True)
class ToolChoice:
    """What the request asks of the model: a mode, or one named function (forced like `required`)."""

    mode: Mode = Mode.AUTO
    function: str | None = None  # a named choice
    parallel: bool = True  # more than one call allowed (OpenAI's parallel_tool_calls)

    @property
    def forced(self) -> bool:
        return self.mode is Mode.REQUIRED or self.function is not None


@dataclass(frozen=True)
class ToolSet:
    """The request's tools and what it asks of them. Empty when the request has no tools."""

    tools: tuple[Tool, ...] = ()
    choice: ToolChoice = field(default_factory=ToolChoice)

    @property
    def active(self) -> bool:
        """Whether the model is shown the tools and its output read for calls."""
        return bool(self.tools) and self.choice.mode is not Mode.NONE

    @property
    def callable(self) -> tuple[Tool, ...]:
        """The tools the output may call: the named one, or all."""
        if self.choice.function is None:
            return self.tools
        return tuple(t for t in self.tools if t.name == self.choice.function)

    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.callable)


def tool_set(tools: Sequence[Any] | None, choice: Any, *, parallel: bool | None = None) -> ToolSet:
    """The request's `tools`, `tool_choice` and `parallel_tool_calls`, or a 400 saying what to fix."""
    parsed = tuple(_tool(raw, i) for i, raw in enumerate(tools or ()))
    seen: set[str] = set()
    for tool in parsed:
        if tool.name in seen:
            raise InvalidRequest(f"Two tools are named {tool.name!r}: give each function a distinct name.",
                                 param="tools")
        seen.add(tool.name)
    wanted = _choice(choice, parallel=True if parallel is None else parallel)
    if wanted.forced and not parsed:
        raise InvalidRequest("tool_choice requires tools: send the functions in `tools`, or leave tool_choice out.",
                             param="tool_choice")
    if wanted.function is not None and wanted.function not in seen:
        raise InvalidRequest(
            f"tool_choice names function {wanted.function!r}, which is not in tools ({', '.join(sorted(seen))}); "
            "name one of them.", param="tool_choice",
        )
    return ToolSet(parsed, wanted)


def _tool(raw: Any, index: int) -> Tool:
    where = f"tools[{index}]"
    if not isinstance(raw, Mapping) or raw.get("type", "function") != "function":
        raise InvalidRequest(f"{where} must be {{\"type\": \"function\", \"function\": {{...}}}}; only function "
                             "tools are supported.", param=where)
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise InvalidRequest(f"{where}.function must be an object with a name (and a description and parameters).",
                             param=f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidRequest(f"{where}.function.name must be 1 to 64 letters, digits, underscores or dashes; got "
                             f"{name!r}.", param=f"{where}.function.name")
    description = function.get("description") or ""
    if not isinstance(description, str):
        raise InvalidRequest(f"{where}.function.description must be a string.", param=f"{where}.function.description")
    return Tool(name, description, _parameters(function.get("parameters"), name, f"{where}.function.parameters"))


def _parameters(raw: Any, name: str, where: str) -> Mapping[str, Any]:
    if raw is None:
        return dict(EMPTY_PARAMETERS)
    if not isinstance(raw, Mapping):
        raise InvalidRequest(f"Invalid schema for function {name!r}: {where} must be a JSON schema object; got "
                             f"{type(raw).__name__}.", param=where)
    try:
        jsonschema.validators.validator_for(raw).check_schema(raw)
    except jsonschema.SchemaError as error:
        at = "/".join(str(p) for p in error.path) or "the top level"
        raise InvalidRequest(f"Invalid schema for function {name!r}: {error.message} (at {at}). Send parameters as "
                             "a JSON schema (draft 2020-12), e.g. {\"type\": \"object\", \"properties\": {...}}.",
                             param=where) from None
    if raw.get("type", "object") != "object":
        raise InvalidRequest(f"Invalid schema for function {name!r}: parameters must describe an object (\"type\": "
                             f"\"object\"); got type {raw.get('type')!r}.", param=where)
    return dict(raw)


def _choice(raw: Any, *, parallel: bool) -> ToolChoice:
    if raw is None:
        return ToolChoice(parallel=parallel)
    if isinstance(raw, str):
        try:
            return ToolChoice(Mode(raw), parallel=parallel)
        except ValueError:
            pass
    elif isinstance(raw, Mapping):
        function = raw.get("function")
        name = function.get("name") if isinstance(function, Mapping) else None
        if raw.get("type", "function") == "function" and isinstance(name, str):  # TGI leaves out the type
            return ToolChoice(Mode.REQUIRED, name, parallel=False)
    raise InvalidRequest(
        f"tool_choice must be \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": "
        f"{{\"name\": ...}}}}; got {raw!r}.", param="tool_choice",
    )
