"""The conversation as the chat template gets it, when tools are involved.

A template that knows tools (it reads the `tools` variable) gets them as transformers' `apply_chat_template`
passes them, and the history as those templates expect it: an assistant's `tool_calls` with their arguments as
objects (OpenAI sends them as JSON strings), `tool` messages as they are.

A template that does not (Gemma's, ChatML, llama.cpp's built-ins) gets pier's fallback, in the Hermes format: the
tools described in the system message (added, or appended to the first one), an assistant's calls written as
`<tool_call>` text, a tool's result as a user message in `<tool_response>` tags, and neighbouring messages of one
role joined, since many such templates insist that user and assistant alternate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pier.model.tools.tool_spec import Tool

FALLBACK_INTRODUCTION = "You may call one or more functions to help with the user's request."
FALLBACK_INSTRUCTIONS = (
    "{introduction} The functions are described in JSON within <tools></tools> tags:\n<tools>\n{tools}\n</tools>\n\n"
    "To call a function, answer with a JSON object holding its name and arguments within <tool_call></tool_call> "
    "tags, one per call:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <arguments-object>}}\n</tool_call>"
)


def fallback_instructions(tools: Sequence[Tool], introduction: str | None = None) -> str:
    """The system prompt's tool part; `introduction` replaces its first sentence (TGI's `tool_prompt`)."""
    return FALLBACK_INSTRUCTIONS.format(
        introduction=(introduction or FALLBACK_INTRODUCTION).strip(),
        tools="\n".join(json.dumps(t.as_openai(), ensure_ascii=False) for t in tools),
    )


def native_messages(messages: Sequence[Mapping[str, Any]], *, short_ids: bool = False) -> list[dict[str, Any]]:
    """The history for a template that knows tools: calls' arguments as objects. With `short_ids`, call ids as the
    9 letters and digits Mistral's templates insist on (the same id gives the same short one, so a tool message
    still names its call)."""
    out = [_with_object_arguments(m) for m in messages]
    return [_with_short_ids(m) for m in out] if short_ids else out


def short_id(call_id: str) -> str:
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    return hashlib.sha256(call_id.encode()).hexdigest()[:9]


def _with_short_ids(message: dict[str, Any]) -> dict[str, Any]:
    if isinstance(message.get("tool_call_id"), str):
        message["tool_call_id"] = short_id(message["tool_call_id"])
    for call in message.get("tool_calls") or []:
        if isinstance(call.get("id"), str):
            call["id"] = short_id(call["id"])
    return message


def _with_object_arguments(message: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(message)
    if message.get("tool_calls"):
        out["tool_calls"] = [_call_with_object(c) for c in message["tool_calls"]]
    return out


def _call_with_object(call: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(call)
    function = dict(call.get("function") or {})
    function["arguments"] = _arguments_object(function.get("arguments"))
    out["function"] = function
    return out


def _arguments_object(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments if arguments is not None else {}


def fallback_messages(messages: Sequence[Mapping[str, Any]], tools: Sequence[Tool],
                      introduction: str | None = None) -> list[dict[str, Any]]:
    """The history for a template that knows no tools (see the module's docstring)."""
    plain = [_plain(m) for m in messages]
    if tools:
        instructions = fallback_instructions(tools, introduction)
        if plain and plain[0]["role"] == "system":
            first = plain[0]["content"]
            plain[0] = {**plain[0], "content": f"{first}\n\n{instructions}" if first else instructions}
        else:
            plain.insert(0, {"role": "system", "content": instructions})
    return _joined(plain)


def _plain(message: Mapping[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    content = message.get("content") or ""
    if role == "tool":
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        written = [_written_call(c) for c in calls]
        content = "\n".join([content, *written] if content else written)
    out = {k: v for k, v in message.items() if k not in ("tool_calls", "tool_call_id", "name")}
    return {**out, "role": role, "content": content}


def _written_call(call: Mapping[str, Any]) -> str:
    function = call.get("function") or {}
    body = {"name": function.get("name"), "arguments": _arguments_object(function.get("arguments"))}
    return f"<tool_call>\n{json.dumps(body, ensure_ascii=False)}\n</tool_call>"


def _joined(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    joined: list[dict[str, Any]] = []
    for message in messages:
        if joined and joined[-1]["role"] == message["role"] and message["role"] in ("user", "assistant"):
            joined[-1] = {**joined[-1], "content": f"{joined[-1]['content']}\n\n{message['content']}"}
        else:
            joined.append(message)
    return joined
