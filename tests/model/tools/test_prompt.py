"""The history as templates get it: objects for templates that know tools, pier's fallback for the others."""

from __future__ import annotations

import json
from typing import Any

from pier.model.chat import CHATML, ChatTemplate
from pier.model.tools.families import Family
from pier.model.tools.prompt import fallback_messages, native_messages
from pier.model.tools.tool_format import ToolFormat
from pier.model.tools.tool_spec import tool_set

TOOLS = tool_set([{"type": "function", "function": {"name": "get_time", "description": "The time now"}}], "auto")
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": '{"zone": "UTC"}'}}
HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Time?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": "12:00"},
    {"role": "user", "content": "Thanks"},
]


def test_native_history_has_arguments_as_objects() -> None:
    messages = native_messages(HISTORY)
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"zone": "UTC"}
    assert messages[2] == HISTORY[2]
    assert HISTORY[1]["tool_calls"][0]["function"]["arguments"] == '{"zone": "UTC"}'  # the request is unchanged


def test_fallback_history_is_text_in_alternating_roles() -> None:
    messages = fallback_messages(HISTORY, TOOLS.tools)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert json.dumps(TOOLS.tools[0].as_openai()) in messages[0]["content"]
    assert messages[2]["content"] == '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>'
    assert messages[3]["content"] == "<tool_response>\n12:00\n</tool_response>\n\nThanks"


def test_fallback_appends_to_the_callers_system_message() -> None:
    messages = fallback_messages([{"role": "system", "content": "Be brief."}, HISTORY[0]], TOOLS.tools)
    assert messages[0]["content"].startswith("Be brief.\n\nYou may call")
    assert len(messages) == 2


QWEN_LIKE = (
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}<|im_end|>\n"
    "{% endfor %}"
)


def test_a_template_that_reads_tools_renders_them_itself() -> None:
    fmt = ToolFormat.of(ChatTemplate(QWEN_LIKE))
    assert fmt == ToolFormat(True, Family.HERMES)
    rendered = ChatTemplate(QWEN_LIKE).render(fmt.messages(HISTORY, TOOLS), tools=fmt.template_tools(TOOLS))
    assert '"name": "get_time", "description": "The time now"' in rendered
    assert '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>' in rendered


def test_chatml_gets_the_fallback_and_tool_choice_none_hides_the_tools() -> None:
    fmt = ToolFormat.of(ChatTemplate(CHATML))
    assert fmt == ToolFormat(False, Family.HERMES)
    assert fmt.template_tools(TOOLS) is None
    assert "<tools>" in fmt.messages(HISTORY, TOOLS)[0]["content"]
    hidden = fmt.messages(HISTORY, tool_set(TOOLS_RAW, "none"))
    assert all("<tools>" not in m["content"] for m in hidden)


TOOLS_RAW = [TOOLS.tools[0].as_openai()]


def test_a_template_with_loop_controls_is_read_for_tools_as_the_renderer_parses_it() -> None:
    source = "{% for t in tools %}{% if not t %}{% continue %}{% endif %}{{ t | tojson }}{% endfor %}<tool_call>"
    assert ToolFormat.of(ChatTemplate(source)).native


def test_mistral_templates_get_nine_character_ids_that_still_pair_call_and_result() -> None:
    messages = ToolFormat(True, Family.MISTRAL).messages(HISTORY, TOOLS)
    call, result = messages[1]["tool_calls"][0]["id"], messages[2]["tool_call_id"]
    assert call == result and len(call) == 9 and call.isalnum()
    assert ToolFormat(True, Family.HERMES).messages(HISTORY, TOOLS)[1]["tool_calls"][0]["id"] == "call_1"
