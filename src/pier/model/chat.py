"""A model's chat template, rendered the way Hugging Face transformers' `apply_chat_template` does.

Model authors write their templates against transformers' environment, so any difference (a missing
filter, HTML-escaping `tojson`, whitespace control) silently changes the prompt the model sees. This
mirrors it: a sandboxed jinja2 environment with trim_blocks/lstrip_blocks, loop controls, a JSON
`tojson`, `raise_exception`, `strftime_now`, the `{% generation %}` block, and the bos/eos token texts.

Which template, first found: the `CHAT_TEMPLATE` environment variable (a llama.cpp built-in name, a file, or the
template itself); a template file in the model folder (`chat_template.jinja`, `chat_template.json`,
`tokenizer_config.json`); the GGUF's own `tokenizer.chat_template`; llama.cpp's built-in template for the GGUF's
architecture, when llama.cpp has one and the vocabulary has its special tokens (a Gemma base model has no
template, but its `<start_of_turn>` tokens); ChatML, as llama.cpp's server falls back to.
"""

from __future__ import annotations

import ctypes
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pier.engine.runner import ModelInfo
from pier.errors import InvalidRequest
from pier.model.gguf_meta import GgufFormatError, read_metadata

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


def template_variables(source: str) -> set[str]:
    """The variables a template reads from its context (like `tools`), as the renderer's environment parses it."""
    return set(jinja2.meta.find_undeclared_variables(_environment().parse(source)))


@dataclass(frozen=True)
class TemplateSource:
    """Where a model's chat template came from, for the copy's log and /info."""

    source: str  # "environment", "file", "gguf", "llama.cpp built-in", "chatml"
    name: str  # the built-in's name, the file, or the GGUF's
    note: str = ""  # why this one, when it is a fallback

    def describe(self) -> str:
        what = {"environment": f"the CHAT_TEMPLATE environment variable ({self.name})",
                "file": f"the template file {self.name}", "gguf": "the GGUF's own tokenizer.chat_template",
                "llama.cpp built-in": f"llama.cpp's built-in {self.name!r} template",
                "chatml": "ChatML"}.get(self.source, self.source)
        return f"{what} ({self.note})" if self.note else what

    def as_dict(self) -> dict[str, str]:
        return {"source": self.source, "name": self.name, "description": self.describe()}


class ChatTemplate:
    """A compiled chat template plus the special-token texts it may print."""

    def __init__(self, source: str, *, bos_token: str = "", eos_token: str = "",
                 origin: TemplateSource | None = None) -> None:
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
        self.origin = origin or TemplateSource("given", "template")

    @classmethod
    def for_model(cls, info: ModelInfo, *, override: str | None = None,
                  model_dir: Path | None = None) -> ChatTemplate:
        """The template a chat with this model is rendered with (see the module's docstring for the order);
        the choice is logged."""
        gguf = _GgufFacts.read(Path(info.path))
        bos, eos = gguf.text(info.bos), gguf.text(info.eos)
        template = _choose(info, gguf, override, model_dir, bos, eos)
        log.log(logging.WARNING if template.origin.note else logging.INFO, "%s chat template: %s", info.name,
                template.origin.describe())
        return template

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


class BuiltinTemplate(ChatTemplate):
    """One of llama.cpp's built-in chat formats, rendered by llama.cpp itself (`llama_chat_apply_template`), as
    llama.cpp's server renders a model whose template it recognises. Messages are role and text; tools and
    template variables have no place in these formats and are left out, as with ChatML."""

    def __init__(self, name: str, *, bos_token: str = "", eos_token: str = "",
                 origin: TemplateSource | None = None) -> None:
        if name not in builtin_templates():
            raise ValueError(f"{name!r} is not one of llama.cpp's built-in chat templates "
                             f"({', '.join(builtin_templates())}).")
        self.name = name
        self.source = f"llama.cpp built-in: {name}"
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.origin = origin or TemplateSource("llama.cpp built-in", name)

    def render(
        self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        from llama_cpp import llama_cpp as llama  # the server has it loaded already

        texts = []
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not isinstance(content, str | None):
                raise TemplateError(f"The {self.name!r} chat format takes messages with a role and text content; "
                                    f"got {dict(message)!r}.", param="messages")
            texts.append((role.encode(), (content or "").encode()))
        chat = (llama.llama_chat_message * max(len(texts), 1))()
        for slot, (role, content) in zip(chat, texts, strict=False):
            slot.role, slot.content = role, content
        size = 256 + 2 * sum(len(r) + len(c) for r, c in texts)
        for _ in range(2):
            buffer = ctypes.create_string_buffer(size)
            written = llama.llama_chat_apply_template(self.name.encode(), chat, len(texts), add_generation_prompt,
                                                      buffer, size)
            if written < 0:
                raise TemplateError(f"llama.cpp's {self.name!r} chat format refused these messages (check their "
                                    f"roles).", param="messages")
            if written <= size:
                return buffer.raw[:written].decode("utf-8", "replace")
            size = written + 1
        raise TemplateError(f"llama.cpp's {self.name!r} chat format did not render.", param="messages")


_BUILTINS: tuple[str, ...] | None = None


def builtin_templates() -> tuple[str, ...]:
    """The names of llama.cpp's built-in chat templates (`llama_chat_builtin_templates`)."""
    global _BUILTINS
    if _BUILTINS is None:
        from llama_cpp import llama_cpp as llama

        count = llama.llama_chat_builtin_templates(None, 0)
        names = (ctypes.c_char_p * count)()
        llama.llama_chat_builtin_templates(names, count)
        _BUILTINS = tuple(name.decode() for name in names if name)
    return _BUILTINS


# A GGUF's general.architecture -> llama.cpp's built-in template for that family, and a special token the
# vocabulary must hold for it to apply (a model of that architecture trained on another format has none).
ARCHITECTURE_TEMPLATES: dict[str, tuple[str, str]] = {
    "gemma": ("gemma", "<start_of_turn>"), "gemma2": ("gemma", "<start_of_turn>"),
    "gemma3": ("gemma", "<start_of_turn>"), "gemma3n": ("gemma", "<start_of_turn>"),
    "llama": ("llama3", "<|eot_id|>"), "llama4": ("llama4", "<|header_start|>"),
    "phi3": ("phi3", "<|end|>"), "command-r": ("command-r", "<|START_OF_TURN_TOKEN|>"),
    "cohere2": ("command-r", "<|START_OF_TURN_TOKEN|>"), "exaone": ("exaone3", "[|endofturn|]"),
    "exaone4": ("exaone4", "[|endofturn|]"), "granite": ("granite", "<|start_of_role|>"),
    "granitemoe": ("granite", "<|start_of_role|>"), "chatglm": ("chatglm4", "<|assistant|>"),
    "minicpm": ("minicpm", "<用户>"), "gpt-oss": ("gpt-oss", "<|start|>"),
}
TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


@dataclass(frozen=True)
class _GgufFacts:
    """What the chat template needs from a GGUF: its architecture and its vocabulary's texts."""

    architecture: str | None = None
    tokens: Sequence[bytes] = ()
    token_types: Sequence[int] = ()

    @classmethod
    def read(cls, path: Path) -> _GgufFacts:
        if not path.is_file():
            return cls()
        keys = ("general.architecture", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type")
        try:
            meta = read_metadata(path, keys)
        except (GgufFormatError, OSError) as error:
            log.warning("could not read %s's metadata for its chat template: %s", path, error)
            return cls()
        return cls(meta.get("general.architecture"), meta.get("tokenizer.ggml.tokens") or (),
                   meta.get("tokenizer.ggml.token_type") or ())

    def text(self, token: int) -> str:
        """A special token's text. llama.cpp detokenizes control tokens to "", but templates print them
        (`{{ bos_token }}`), so they come from the token list itself."""
        return self.tokens[token].decode("utf-8", "replace") if 0 <= token < len(self.tokens) else ""

    def has_special(self, text: str) -> bool:
        wanted = text.encode()
        control = (3, 4)  # llama.cpp's token types CONTROL and USER_DEFINED
        if self.token_types:
            return any(t == wanted and kind in control for t, kind in zip(self.tokens, self.token_types, strict=False))
        return wanted in self.tokens


def _choose(info: ModelInfo, gguf: _GgufFacts, override: str | None, model_dir: Path | None, bos: str,
            eos: str) -> ChatTemplate:
    tokens = {"bos_token": bos, "eos_token": eos}
    if override and override.strip():
        return _from_setting(override.strip(), tokens)
    found = _template_file(model_dir) if model_dir is not None else None
    if found is not None:
        path, source = found
        return ChatTemplate(source, **tokens, origin=TemplateSource("file", str(path)))
    if info.chat_template:
        return ChatTemplate(info.chat_template, **tokens, origin=TemplateSource("gguf", Path(info.path).name))
    family = ARCHITECTURE_TEMPLATES.get(gguf.architecture or "")
    if family is not None and gguf.has_special(family[1]) and family[0] in _builtins_or_none():
        note = f"the GGUF has no chat template; llama.cpp's for the {gguf.architecture} architecture"
        return BuiltinTemplate(family[0], **tokens, origin=TemplateSource("llama.cpp built-in", family[0], note))
    why = "the GGUF has no chat template"
    if gguf.architecture:
        why += f" and llama.cpp has no built-in one for its {gguf.architecture} vocabulary"
    origin = TemplateSource("chatml", "chatml", why + ", as llama.cpp's server does")
    return ChatTemplate(CHATML, **tokens, origin=origin)


def _builtins_or_none() -> tuple[str, ...]:
    try:
        return builtin_templates()
    except (ImportError, OSError, AttributeError):  # llama.cpp not loadable here: no built-ins to offer
        return ()


def _from_setting(value: str, tokens: dict[str, str]) -> ChatTemplate:
    """CHAT_TEMPLATE: a llama.cpp built-in's name, a template file, or the jinja2 template itself."""
    if "{" not in value and value in _builtins_or_none():
        return BuiltinTemplate(value, **tokens, origin=TemplateSource("environment", f"llama.cpp built-in {value!r}"))
    if "{" not in value and "\n" not in value:
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError(f"CHAT_TEMPLATE={value!r} is neither a llama.cpp built-in template "
                             f"({', '.join(_builtins_or_none()) or 'none loadable'}) nor a file, nor a jinja2 "
                             "template; set it to one of those.")
        return ChatTemplate(_read_template(path), **tokens, origin=TemplateSource("environment", str(path)))
    return ChatTemplate(value, **tokens, origin=TemplateSource("environment", "the template itself"))


def _template_file(model_dir: Path) -> tuple[Path, str] | None:
    """A template shipped beside the model, as Hugging Face repositories ship it."""
    for name in TEMPLATE_FILES:
        path = model_dir / name
        if path.is_file():
            source = _read_template(path)
            if source:
                return path, source
    return None


def _read_template(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        return text
    try:
        value = json.loads(text).get("chat_template")
    except (ValueError, AttributeError) as error:
        raise ValueError(f"{path} is not a JSON object ({error}); fix it or remove it.") from None
    if isinstance(value, list):  # transformers' named templates: the default one
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        value = named.get("default") or next(iter(named.values()), None)
    return value if isinstance(value, str) else ''
