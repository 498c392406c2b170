"""llama-server's tokenizer routes, in its request and response shapes, so tools written for llama-server work
against a pier copy: POST /tokenize, /detokenize and /apply-template.

- /tokenize `{"content", "add_special": false, "parse_special": true, "with_pieces": false}` -> `{"tokens": [...]}`,
  ids, or `{"id", "piece"}` objects whose piece is text, or its bytes as a list when they are not UTF-8. `content`
  may be a list of strings and token ids (llama-server's mixed prompt): ids are kept as they are.
- /detokenize `{"tokens": [...]}` -> `{"content": "..."}`.
- /apply-template `{"messages": [...]}` (and a chat request's `tools`, `chat_template_kwargs`,
  `add_generation_prompt`) -> `{"prompt": "..."}`: the text /v1/chat/completions would tokenize.
Errors take OpenAI's shape, as llama-server's do (server/errors.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from pier.errors import InvalidRequest
from pier.model.tools.tool_spec import tool_set
from pier.server.flavors.openai.requests import ChatMessage, message_problem
from pier.server.served_model import INLINE_TOKENIZE_CHARS, ServedModel
from pier.server.server_state import State

router = APIRouter(tags=["llama-server"])

class TokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    content: str | list[str | int]
    add_special: bool = False
    parse_special: bool = True
    with_pieces: bool = False


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    tokens: list[int]


class ApplyTemplateRequest(BaseModel):
    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[Any] | None = None
    tool_choice: Any = None
    tool_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, state: State) -> dict[str, Any]:
    model = state.loaded()
    args = (model, body.content, body.add_special, body.parse_special)
    size = len(body.content) if isinstance(body.content, str) else sum(len(str(p)) for p in body.content)
    # a long text is tokenized on a worker thread: the event loop must keep answering /ping
    tokens = mixed_tokens(*args) if size <= INLINE_TOKENIZE_CHARS else await asyncio.to_thread(mixed_tokens, *args)
    if not body.with_pieces:
        return {"tokens": tokens}
    return {"tokens": [{"id": token, "piece": piece(model.engine.runner.piece(token))} for token in tokens]}


@router.post("/detokenize")
async def detokenize(body: DetokenizeRequest, state: State) -> dict[str, Any]:
    model = state.loaded()
    check_ids(body.tokens, model.n_vocab, "tokens")
    return {"content": model.detokenize(body.tokens)}


@router.post("/apply-template")
async def apply_template(body: ApplyTemplateRequest, state: State) -> dict[str, Any]:
    model = state.loaded()
    for index, message in enumerate(body.messages):
        if (problem := message_problem(index, message)) is not None:
            raise problem
    tools = model.tool_format
    chosen = tool_set(body.tools, body.tool_choice)
    prompt = model.prompt_text(
        tools.messages([m.for_template() for m in body.messages], chosen, body.tool_prompt),
        add_generation_prompt=body.add_generation_prompt, tools=tools.template_tools(chosen),
        extra=body.chat_template_kwargs)
    return {"prompt": prompt}


def mixed_tokens(model: ServedModel, content: str | Sequence[str | int], add_special: bool,
                 parse_special: bool) -> list[int]:
    """llama-server's tokenize_mixed: strings tokenized (special tokens only before the first), ids kept."""
    parts = [content] if isinstance(content, str) else list(content)
    check_ids([p for p in parts if isinstance(p, int)], model.n_vocab, "content")
    tokens: list[int] = []
    for index, part in enumerate(parts):
        if isinstance(part, int):
            tokens.append(part)
        else:
            tokens += model.engine.runner.tokenize(part, add_special and index == 0 and model.info.add_bos,
                                                   parse_special)
    return tokens


def check_ids(tokens: Sequence[int], n_vocab: int, param: str) -> None:
    bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
    if bad is not None:
        raise InvalidRequest(f"Token id {bad} is outside the vocabulary: ids must be in [0, {n_vocab}).", param=param)


def piece(raw: bytes) -> str | list[int]:
    """A token's text, or its bytes when they are not UTF-8 on their own (part of a character), as llama-server."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)
