"""A GGUF's chat template, rendered the way Hugging Face transformers' `apply_chat_template` does.

Model authors write their templates against transformers' environment, so any difference (a missing
filter, HTML-escaping `tojson`, whitespace control) silently changes the prompt the model sees. This
mirrors it: a sandboxed jinja2 environment with trim_blocks/lstrip_blocks, loop controls, a JSON
`tojson`, `raise_exception`, `strftime_now`, the `{% generation %}` block, and the bos/eos token texts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pier.engine.runner import ModelInfo
from pier.errors import InvalidRequest

log = logging.getLogger(__name__)

# What llama.cpp's server falls back to when a GGUF carries no template.
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class TemplateError(InvalidRequest):
    """The template refused the conversation (its own `raise_exception`) or failed while rendering it."""


# What the renderer itself gives every template: request fields, the model's token texts, and the functions
# templates call. `chat_template_kwargs` adds variables beside these; it cannot replace them.
RENDERER_NAMES = {
    "messages": "the request's `messages`", "tools": "the request's `tools`", "documents": "the request's documents",
    "add_generation_prompt": "the request's `add_generation_prompt`", "bos_token": "the model's BOS text",
    "eos_token": "the model's EOS text", "raise_exception": "a function templates call",
    "strftime_now": "a function templates call",
}


def template_kwargs(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """A request's `chat_template_kwargs`, refused (400) when a key is one of the renderer's own names."""
    clash = [name for name in (extra or {}) if name in RENDERER_NAMES]
    if clash:
        named = "; ".join(f"`{name}` is {RENDERER_NAMES[name]}" for name in clash)
        raise TemplateError(
            f"chat_template_kwargs cannot set {', '.join(clash)}: {named}. Send request fields at the top level "
            "of the request, and only the template's own variables (like enable_thinking) in chat_template_kwargs.",
            param="chat_template_kwargs",
        )
    return dict(extra or {})


class _GenerationBlock(Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks; rendering keeps
    only the body, as transformers does when no mask is asked for."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 declares it on Extension)

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _raise_exception(message: str) -> None:
    raise TemplateError(f"The model's chat template rejected the conversation: {message}", param="messages")


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # jinja2's own tojson HTML-escapes <, > and &, which would change the prompt.
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _GenerationBlock],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


class ChatTemplate:
    """A compiled chat template plus the special-token texts it may print."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "") -> None:
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as error:
            raise ValueError(
                f"The model's chat template is not valid jinja2 (line {error.lineno}: {error.message}); "
                "fix tokenizer.chat_template in the GGUF metadata."
            ) from error
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token

    @classmethod
    def for_model(cls, info: ModelInfo) -> ChatTemplate:
        """The model's own template, or ChatML (as llama.cpp does) when the GGUF has none."""
        if not info.chat_template:
            log.warning("%s has no chat template; chat requests use ChatML", info.name)
        bos, eos = _token_texts(Path(info.path), info.bos, info.eos)
        return cls(info.chat_template or CHATML, bos_token=bos, eos_token=eos)

    def render(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        """The prompt text for `messages`. Raises TemplateError with the template's own message."""
        context = {
            **extra, "messages": list(messages), "tools": tools, "documents": documents,
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token, "eos_token": self.eos_token,
        }
        try:
            return self._template.render(**context)
        except TemplateError:
            raise
        except jinja2.TemplateError as error:
            raise TemplateError(
                f"The model's chat template could not render these messages ({error}); check that every "
                "message has a role and text content the template expects.", param="messages",
            ) from error
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as error:
            raise TemplateError(
                f"The model's chat template failed on these messages ({type(error).__name__}: {error}); "
                "check the roles and contents it expects.", param="messages",
            ) from error


def _token_texts(path: Path, *token_ids: int) -> tuple[str, ...]:
    """Texts of special tokens from the GGUF vocabulary. llama.cpp detokenizes control tokens to "",
    but templates print them (`{{ bos_token }}`), so they come from the token list itself."""
    if not path.is_file():
        return tuple("" for _ in token_ids)
    from gguf import GGUFReader  # only needed for real model files

    field = GGUFReader(path).fields.get("tokenizer.ggml.tokens")
    if field is None:
        return tuple("" for _ in token_ids)
    return tuple(
        bytes(field.parts[field.data[t]]).decode("utf-8", "replace") if 0 <= t < len(field.data) else ""
        for t in token_ids
    )
