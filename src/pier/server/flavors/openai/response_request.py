"""The OpenAI Responses API's request body (`POST /v1/responses`), read as the chat it is.

A response is a chat turn in other shapes: `instructions` is the system message, `input` the conversation (a
string, or items: messages, the function calls an earlier response made and their outputs), `text.format` the
response_format, function tools written flat. So a body becomes a `ChatCompletionRequest` and runs on the chat
path (template, tools, grammar); only the answer's shapes differ (response_view.py).

pier keeps no responses: what needs them stored (`previous_response_id`, `conversation`, `background`, item
references) is refused with how to send the same thing whole. The sampling extras pier takes on chat
(`top_k`, `min_p`, `seed`, `stop`, penalties, `ignore_eos`, `min_tokens`) are taken here too.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict

from pier.errors import InvalidRequest
from pier.server.flavors.openai.requests import MAX_TOP_LOGPROBS, ChatCompletionRequest, OpenAIRequest

LOGPROBS_INCLUDE = "message.output_text.logprobs"  # the `include` value that asks for output logprobs
_STORED = ("pier keeps no responses, so {what} cannot be followed: send the whole conversation in `input` (an "
           "earlier response's `output` items can be appended to it as they are).")
# Fields the chat path reads as they are; the rest of the Responses body is translated below.
_CHAT_FIELDS = ("model", "stream", "stream_options", "stop", "stop_token_ids", "seed", "temperature", "top_p",
                "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty", "logit_bias",
                "ignore_eos", "min_tokens", "parallel_tool_calls", "chat_template_kwargs")


class TextConfig(BaseModel):
    model_config = ConfigDict(extra="allow")
    format: dict[str, Any] | None = None


class ResponseRequest(OpenAIRequest):
    """A `POST /v1/responses` body. Unknown fields are accepted and ignored, as on the chat route."""

    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: TextConfig | None = None
    top_logprobs: int | None = None
    include: list[str] | None = None
    metadata: dict[str, str] | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    background: bool | None = None
    truncation: str | None = None
    reasoning: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    def refuse_unsupported(self) -> None:
        if self.previous_response_id is not None:
            raise InvalidRequest(_STORED.format(what="previous_response_id"), param="previous_response_id")
        if self.conversation is not None:
            raise InvalidRequest(_STORED.format(what="a conversation"), param="conversation")
        if self.background:
            raise InvalidRequest("pier answers responses in the foreground only: remove `background` (stream the "
                                 "response instead, or use the endpoint's asynchronous inference).", param="background")
        if self.truncation not in (None, "disabled"):
            raise InvalidRequest(f"truncation {self.truncation!r} is not supported: pier never drops input items. "
                                 "Use \"disabled\" (the default) and keep the input within the model's context.",
                                 param="truncation")
        if self.top_logprobs is not None and not 0 <= self.top_logprobs <= MAX_TOP_LOGPROBS:
            raise InvalidRequest(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}; got {self.top_logprobs}.",
                                 param="top_logprobs")

    @property
    def logprobs(self) -> bool:
        return LOGPROBS_INCLUDE in (self.include or ())

    def chat(self) -> ChatCompletionRequest:
        """The chat this response is; checked as a chat body is (a 400 naming the field)."""
        self.refuse_unsupported()
        fields = {name: getattr(self, name) for name in _CHAT_FIELDS if getattr(self, name) is not None}
        fields |= {"messages": self.messages(), "max_completion_tokens": self.max_output_tokens,
                   "logprobs": self.logprobs or None, "top_logprobs": self.top_logprobs if self.logprobs else None,
                   "tools": [_function_tool(t, i) for i, t in enumerate(self.tools or [])] or None,
                   "tool_choice": _tool_choice(self.tool_choice), "response_format": _response_format(self.text)}
        return ChatCompletionRequest.model_validate({**(self.model_extra or {}), **fields})

    def messages(self) -> list[dict[str, Any]]:
        system = [{"role": "system", "content": self.instructions}] if self.instructions else []
        if isinstance(self.input, str):
            return [*system, {"role": "user", "content": self.input}]
        if not self.input:
            raise InvalidRequest("input must not be empty: send a string or at least one item.", param="input")
        return [*system, *_conversation(self.input)]

    def origins(self) -> list[str]:
        """Where each of the chat's messages came from in this body ("instructions", "input", "input[3]"), to name
        the field in the chat path's errors."""
        system = ["instructions"] if self.instructions else []
        if isinstance(self.input, str):
            return [*system, "input"]
        origins: list[tuple[str, str]] = []
        for index, item in enumerate(self.input):
            kind = item.get("type", "message")
            follows_a_call = origins and origins[-1][1] == "function_call"
            if kind == "reasoning" or (kind == "function_call" and follows_a_call):
                continue  # left out, or one message with the call before it
            origins.append((f"input[{index}]", kind))
        return [*system, *(where for where, _ in origins)]

    def renamed(self, error: InvalidRequest) -> InvalidRequest:
        """A chat path's error in this body's words: `messages[2].content` as the input item it came from,
        `max_completion_tokens` as max_output_tokens, response_format as text.format, a tool's function as the tool."""
        names = [(f"messages[{k}]", where) for k, where in enumerate(self.origins())][::-1]  # [12] before [1]
        names += [("max_completion_tokens", "max_output_tokens"), ("response_format.json_schema", "text.format"),
                  ("response_format", "text.format"), (".function.", ".")]
        message, param = error.message, error.param
        for old, new in names:
            message = message.replace(old, new)
            param = param.replace(old, new) if param is not None else None
        renamed = copy.copy(error)
        renamed.message, renamed.param, renamed.args = message, param, (message,)
        return renamed


def _conversation(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Input items as chat messages: an earlier response's function calls (one message for calls made together)
    and their outputs become the assistant's tool_calls and tool messages."""
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        where = f"input[{index}]"
        if kind == "message":
            messages.append({"role": _text(item.get("role"), f"{where}.role"),
                             "content": _content(item.get("content"), where)})
        elif kind == "function_call":
            call = {"id": _text(item.get("call_id"), f"{where}.call_id"), "type": "function",
                    "function": {"name": _text(item.get("name"), f"{where}.name"),
                                 "arguments": _text(item.get("arguments"), f"{where}.arguments")}}
            if messages and messages[-1]["role"] == "assistant" and messages[-1].get("tool_calls") is not None:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": _text(item.get("call_id"), f"{where}.call_id"),
                             "content": _content(item.get("output"), where, field="output")})
        elif kind == "reasoning":
            continue  # another model's reasoning summary: nothing a chat template takes
        elif kind == "item_reference":
            raise InvalidRequest(_STORED.format(what="an item_reference"), param=where)
        else:
            raise InvalidRequest(f"{where} has type {kind!r}; pier takes input items of type \"message\", "
                                 "\"function_call\" and \"function_call_output\".", param=f"{where}.type")
    return messages


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{where} must be a string; got {type(value).__name__}.", param=where)
    return value


_TEXT_PARTS = ("input_text", "output_text", "text")


def _content(content: Any, where: str, *, field: str = "content") -> str:
    """A message's content as text: a string, or text parts (an image or a file is refused: pier's models read
    text)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.{field} must be a string or a list of content parts.", param=f"{where}.{field}")
    texts = []
    for k, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
            raise InvalidRequest(f"{where}.{field}[{k}] is a {kind!r} part; pier's models read text only: send "
                                 "parts of type \"input_text\" (or the content as a string).",
                                 param=f"{where}.{field}[{k}]")
        texts.append(part["text"])
    return "".join(texts)


def _function_tool(tool: dict[str, Any], index: int) -> dict[str, Any]:
    """A Responses function tool (written flat) as chat's."""
    if tool.get("type") != "function":
        raise InvalidRequest(f"tools[{index}] has type {tool.get('type')!r}; pier runs function tools only "
                             "({\"type\": \"function\", \"name\": ..., \"parameters\": {...}}).",
                             param=f"tools[{index}].type")
    function = {key: tool[key] for key in ("name", "description", "parameters", "strict") if tool.get(key) is not None}
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    if choice is None or isinstance(choice, str):
        return choice
    if choice.get("type") != "function" or not isinstance(choice.get("name"), str):
        raise InvalidRequest("tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                             f"\"name\": ...}}; got {choice!r}.", param="tool_choice")
    return {"type": "function", "function": {"name": choice["name"]}}


def _response_format(text: TextConfig | None) -> dict[str, Any] | None:
    """`text.format` as chat's response_format: json_schema's fields sit beside its type here."""
    given = (text.format if text is not None else None) or {"type": "text"}
    kind = given.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        schema = {key: given[key] for key in ("name", "schema", "strict", "description") if key in given}
        return {"type": "json_schema", "json_schema": schema}
    raise InvalidRequest(f"text.format has type {kind!r}; use \"text\", \"json_object\" or \"json_schema\".",
                         param="text.format.type")
