"""The tool-call formats of chat template families, and which one a template writes.

A family is known by the text its template writes (the same way llama.cpp's chat parsers pick theirs). Each family
opens its calls with a marker; Llama 3.x may also answer with a bare JSON object. What each writes:

| family | output |
|---|---|
| hermes (Hermes, Qwen, pier's fallback) | `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeated |
| llama3 (Llama 3.1-3.3) | `{"name": ..., "parameters": {...}}`, or the same after `<\\|python_tag\\|>` |
| mistral (Mistral v0.3, Nemo, Small) | `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` |
| granite (Granite 3.x) | `<\\|tool_call\\|>[{"name": ..., "arguments": {...}}, ...]` |
| firefunction (FireFunction v2) | ` functools[{"name": ..., "arguments": {...}}, ...]` |
| functionary-v3.1 (Functionary v3.1, Llama 3.1's own custom-tool format) | `<function=NAME>{...}</function>` |
| command-r7b (Command R7B) | `<\\|START_ACTION\\|>[{"tool_name": ..., "parameters": {...}}]<\\|END_ACTION\\|>` |
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Family(StrEnum):
    HERMES = "hermes"
    LLAMA3 = "llama3"
    MISTRAL = "mistral"
    GRANITE = "granite"
    FIREFUNCTION = "firefunction"
    COMMAND_R7B = "command-r7b"
    FUNCTIONARY = "functionary-v3.1"


@dataclass(frozen=True)
class Format:
    """How a family writes its calls: what opens them, and the text a grammar forces around them."""

    family: Family
    markers: tuple[str, ...]  # texts that open the calls
    bare_json: bool = False  # an answer that starts with a JSON object is a call
    name_key: str = "name"
    args_key: str = "arguments"
    open: str = ""  # before the first call
    between: str = ", "  # between two calls
    close: str = ""  # after the last
    tagged: bool = False  # the name is in the opening tag (`<function=NAME>`) and the object is the arguments


FORMATS: dict[Family, Format] = {
    Family.HERMES: Format(Family.HERMES, ("<tool_call>",), open="<tool_call>\n",
                          between="\n</tool_call>\n<tool_call>\n", close="\n</tool_call>"),
    Family.LLAMA3: Format(Family.LLAMA3, ("<|python_tag|>",), bare_json=True, args_key="parameters", between="; "),
    Family.MISTRAL: Format(Family.MISTRAL, ("[TOOL_CALLS]",), open="[TOOL_CALLS][", close="]"),
    Family.GRANITE: Format(Family.GRANITE, ("<|tool_call|>",), open="<|tool_call|>[", close="]"),
    Family.FIREFUNCTION: Format(Family.FIREFUNCTION, (" functools[", "functools["), open=" functools[", close="]"),
    Family.COMMAND_R7B: Format(Family.COMMAND_R7B, ("<|START_ACTION|>",), name_key="tool_name",
                               args_key="parameters", open="<|START_ACTION|>[", close="]<|END_ACTION|>"),
    Family.FUNCTIONARY: Format(Family.FUNCTIONARY, ("<function=",), tagged=True, between="", close=""),
}

# What a template's text shows of its family, most specific first.
_SIGNS: tuple[tuple[Family, tuple[str, ...]], ...] = (
    (Family.MISTRAL, ("[TOOL_CALLS]",)),
    (Family.COMMAND_R7B, ("<|START_ACTION|>",)),
    (Family.GRANITE, ("<|tool_call|>",)),
    (Family.FIREFUNCTION, (" functools[",)),
    (Family.HERMES, ("<tool_call>",)),
    (Family.FUNCTIONARY, ("<function=",)),
    (Family.LLAMA3, ("<|python_tag|>", "<|start_header_id|>ipython")),
)


def family_of(template: str) -> Family | None:
    """The family whose calls `template` writes, or None when it shows none of them."""
    for family, signs in _SIGNS:
        if any(sign in template for sign in signs):
            return family
    return None
