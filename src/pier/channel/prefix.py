"""A request's prompt prefix as text blocks: cumulative hashes of its leading blocks, the same on both sides.

The gateway's router remembers the blocks of what it sent each copy; a copy reports the blocks of the prompts its
prefix cache still holds (pier.channel.kv_held). Both hash the request body with these functions, so they agree.

Block i hashes everything up to the end of block i, so two requests share block i exactly when their
first i+1 blocks are equal, and the longest run of shared blocks says how much of the prompt a copy
likely has in its prefix cache. Chat messages are rendered role by role (not with the model's template:
only equality of prefixes matters), a token-id prompt as its ids. Only whole blocks count: a partial
block is not yet a stable prefix, and a prompt shorter than one block is cheap to recompute anywhere.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

BLOCK_CHARS = 128
MAX_BLOCKS = 32  # 4 KiB of prompt: beyond that, a longer match rarely changes the choice


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: str = ""
    content: str | list[Any] | None = None

    def text(self) -> str:
        return f"{self.role}\x1f{self.content_text()}\x1e"

    def content_text(self) -> str:
        if isinstance(self.content, list):
            parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in self.content]
            return "".join(str(p) for p in parts)
        return self.content or ""


def _item_message(item: Any) -> _Message:
    """A Responses input item as the chat message it stands for (a call and its output by their text)."""
    if not isinstance(item, dict):
        return _Message(role="user", content=str(item))
    kind = item.get("type", "message")
    if kind == "function_call":
        return _Message(role="assistant", content=f"{item.get('name', '')}{item.get('arguments', '')}")
    if kind == "function_call_output":
        output = item.get("output")
        return _Message(role="tool", content=output if isinstance(output, str | list) else "")
    content = item.get("content")
    return _Message(role=str(item.get("role", "")), content=content if isinstance(content, str | list) else None)


class _Prompted(BaseModel):
    """The fields that carry a prompt in every payload a copy takes: TGI, OpenAI chat, completions and responses
    (`instructions` and `input`, read as the chat's messages)."""

    model_config = ConfigDict(extra="ignore")

    inputs: str | None = None
    messages: list[_Message] | None = None
    prompt: str | list[int] | list[str] | list[list[int]] | None = None
    instructions: str | None = None
    input: str | list[Any] | None = None

    def text(self, *, roles: bool = True) -> str:
        messages = self.messages or self._response_messages()
        if messages:
            return "".join(m.text() if roles else m.content_text() for m in messages)
        if self.inputs is not None:
            return self.inputs
        prompt = self.prompt
        if isinstance(prompt, list):
            first = prompt[0] if prompt else ""  # a batch of prompts routes by its first
            prompt = first if isinstance(first, str | list) else prompt
        if isinstance(prompt, list):
            return " ".join(str(token) for token in prompt)
        return prompt or ""


    def _response_messages(self) -> list[_Message]:
        if self.input is None or self.input == []:
            return []
        system = [_Message(role="system", content=self.instructions)] if self.instructions else []
        if isinstance(self.input, str):
            return [*system, _Message(role="user", content=self.input)]
        return [*system, *(_item_message(item) for item in self.input)]


def prompt_text(body: bytes) -> str:
    """The prompt of a JSON request body, or "" when the body is not one of the known payloads."""
    if body.lstrip()[:1] != b"{":
        return ""
    try:
        return _Prompted.model_validate_json(body).text()
    except ValidationError:
        return ""


def content_text(body: bytes) -> str:
    """The text content of an OpenAI request's messages, joined (its prompt for a completion): what AWS's
    PREFIX_AWARE routing takes its prefix from on the OpenAI-compatible path; "" for other bodies."""
    if body.lstrip()[:1] != b"{":
        return ""
    try:
        return _Prompted.model_validate_json(body).text(roles=False)
    except ValidationError:
        return ""


def prefix_blocks(text: str, *, block_chars: int = BLOCK_CHARS, max_blocks: int = MAX_BLOCKS) -> tuple[str, ...]:
    """Cumulative hashes of the whole `block_chars` blocks at the start of `text`, shortest prefix first."""
    digest = hashlib.blake2b(digest_size=12)
    blocks = []
    for start in range(0, min(len(text) // block_chars, max_blocks) * block_chars, block_chars):
        digest.update(text[start : start + block_chars].encode("utf-8", "surrogatepass"))
        blocks.append(digest.copy().hexdigest())
    return tuple(blocks)


def request_prefix(body: bytes) -> tuple[str, ...]:
    return prefix_blocks(prompt_text(body))
