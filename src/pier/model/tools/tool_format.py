"""What one model's chat template does with tools: whether it renders them itself, and the family whose calls its
answers are read for. Decided once per model from the template's text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jinja2

from pier.model.chat import BuiltinTemplate, ChatTemplate, template_variables
from pier.model.tools.families import FORMATS, Family, Format, family_of
from pier.model.tools.prompt import fallback_messages, native_messages
from pier.model.tools.tool_grammar import tool_grammar
from pier.model.tools.tool_spec import ToolSet


def reads_tools(template: ChatTemplate) -> bool:
    """Whether the template uses the `tools` variable (transformers' way of passing them)."""
    if isinstance(template, BuiltinTemplate):
        return False
    try:
        return "tools" in template_variables(template.source)
    except jinja2.TemplateSyntaxError:
        return False


@dataclass(frozen=True)
class ToolFormat:
    native: bool  # the template renders tools itself; else pier's fallback prompt (Hermes format)
    family: Family

    @classmethod
    def of(cls, template: ChatTemplate) -> ToolFormat:
        if not reads_tools(template):
            return cls(False, Family.HERMES)
        # A template that knows tools in a format pier does not parse is read as Hermes, the most common one.
        return cls(True, family_of(template.source) or Family.HERMES)

    def describe(self) -> str:
        how = "the chat template renders them" if self.native else "pier's fallback system prompt"
        return f"{self.family.value} calls; tools through {how}"

    def messages(self, messages: Sequence[Mapping[str, Any]], tools: ToolSet,
                 introduction: str | None = None) -> list[dict[str, Any]]:
        """The history as the template gets it (see prompt.py); tools are shown only when they are active.
        `introduction` (TGI's tool_prompt) opens the fallback's description of the tools."""
        if self.native:
            return native_messages(messages, short_ids=self.family is Family.MISTRAL)
        return fallback_messages(messages, tools.tools if tools.active else (), introduction)

    def template_tools(self, tools: ToolSet) -> list[dict[str, Any]] | None:
        """The `tools` variable for the template."""
        if not self.native or not tools.active:
            return None
        return [t.as_openai() for t in tools.tools]

    def grammar(self, tools: ToolSet) -> Grammar | None:
        """The grammar of the request's calls: from the first token when the request forces them; under `auto`, lazy
        (from the family's marker on, once the model writes it), so a call the model begins is always whole and
        valid. Llama 3.x's bare JSON has no marker to wait for: its `auto` answers are only parsed."""
        if not tools.active:
            return None
        grammar = tool_grammar(self.family, tools.callable, parallel=tools.choice.parallel)
        if tools.choice.forced:
            return Grammar(grammar)
        marker = lazy_marker(FORMATS[self.family])
        return Grammar(grammar, (rf"[\s\S]*?({re.escape(marker)}[\s\S]*)",)) if marker else None


@dataclass(frozen=True)
class Grammar:
    """GBNF for the engine, lazy when it has triggers (SamplingParams.grammar_triggers)."""

    text: str
    triggers: tuple[str, ...] = ()


def lazy_marker(fmt: Format) -> str | None:
    """The text a lazy grammar waits for: the marker its grammar begins with."""
    begins = fmt.open or ("<function=" if fmt.tagged else "")
    return next((m for m in fmt.markers if begins.startswith(m)), None)
