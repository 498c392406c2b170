"""OpenAI's Responses API (`POST /v1/responses`) with the `openai` client, over a real engine on the fake runner:
the same chat as /v1/chat/completions, answered as a `response` whole or as its typed events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from pier.engine.fake import FakeRunner
from tests.server.conftest import app_client
from tests.server.flavors.test_openai_tools import ASK, SCHEMAS, WEATHER_PARAMETERS

pytestmark = pytest.mark.anyio

GREEDY: dict[str, Any] = {"temperature": 0}
FLAT_TOOLS: list[Any] = [
    {"type": "function", "name": "get_weather", "description": "The weather in a city",
     "parameters": WEATHER_PARAMETERS},
    {"type": "function", "name": "get_time", "description": "The time now",
     "parameters": {"type": "object", "properties": {}}},
]


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(FakeRunner(n_ctx=2048, n_seq_max=16, n_batch=64)) as client:
        yield client


@pytest.fixture
def client(http: httpx.AsyncClient) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://pier/v1", api_key="none", http_client=http, max_retries=0)


async def test_a_response_is_the_chat_it_stands_for(client: openai.AsyncOpenAI) -> None:
    """instructions + input are the system and user messages of a chat: the same greedy text, the same usage."""
    response = await client.responses.create(model="fake-model", instructions="Be brief.", input="hello world",
                                             max_output_tokens=8, **GREEDY)
    chat = await client.chat.completions.create(
        model="fake-model", messages=[{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "hello world"}], max_tokens=8, **GREEDY)
    assert response.id.startswith("resp_") and response.object == "response"
    assert response.output_text == chat.choices[0].message.content
    [message] = response.output
    assert message.type == "message" and message.role == "assistant" and message.id.startswith("msg_")
    assert response.status == "incomplete" and message.status == "incomplete"  # 8 tokens: max_output_tokens
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None and chat.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (chat.usage.prompt_tokens, 8)
    assert response.usage.total_tokens == response.usage.input_tokens + 8
    assert response.model == "fake-model" and response.instructions == "Be brief." and response.store is False


async def test_a_finished_answer_is_completed(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="fake-model", input="hello", max_output_tokens=200,
                                             extra_body={"stop": [" "], "min_tokens": 1}, **GREEDY)
    assert response.status == "completed" and response.incomplete_details is None
    assert response.completed_at is not None and response.output[0].status == "completed"


async def test_the_stream_is_openais_events_and_adds_up_to_the_whole(client: openai.AsyncOpenAI) -> None:
    whole = await client.responses.create(model="fake-model", input="hello world", max_output_tokens=12, **GREEDY)
    events = [e async for e in await client.responses.create(
        model="fake-model", input="hello world", max_output_tokens=12, stream=True, **GREEDY)]
    kinds = [e.type for e in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.incomplete"]
    assert set(kinds[4:-4]) == {"response.output_text.delta"}
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    final = events[-1].response  # type: ignore[union-attr]
    assert text == whole.output_text == final.output_text
    assert events[0].response.status == "in_progress" and events[0].response.id == final.id  # type: ignore[union-attr]
    assert final.usage is not None and final.usage.output_tokens == 12
    item_ids = {e.item_id for e in events if hasattr(e, "item_id")}
    assert item_ids == {final.output[0].id}


async def test_the_sdks_stream_helper_reads_it(client: openai.AsyncOpenAI) -> None:
    """`responses.stream` rebuilds the response from the events and checks their order and ids as it goes (its
    final response comes only with response.completed: a stop string ends this one)."""
    async with client.responses.stream(model="fake-model", input="hello world", max_output_tokens=200,
                                       extra_body={"stop": [" "], "min_tokens": 2}, **GREEDY) as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert final.output_text == "".join(deltas) and final.status == "completed"
    assert final.usage is not None and final.usage.output_tokens >= 2


async def test_the_raw_stream_names_each_event(http: httpx.AsyncClient) -> None:
    body = {"model": "fake-model", "input": "hello", "max_output_tokens": 3, "stream": True, **GREEDY}
    response = await http.post("/v1/responses", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    blocks = [b for b in response.text.split("\n\n") if b.strip()]
    for block in blocks:
        name, data = block.split("\n")
        assert name.removeprefix("event: ") == json.loads(data.removeprefix("data: "))["type"]
    assert "[DONE]" not in response.text


async def test_required_tool_choice_gives_a_function_call_item(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="fake-model", input=ASK, tools=FLAT_TOOLS, tool_choice="required",
                                             max_output_tokens=200, temperature=1.0, parallel_tool_calls=False,
                                             extra_body={"seed": 1})
    [call] = [item for item in response.output if item.type == "function_call"]
    assert call.call_id.startswith("call_") and call.id is not None and call.id.startswith("fc_")
    jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    assert call.status == "completed"


async def test_a_named_function_streams_its_arguments(client: openai.AsyncOpenAI) -> None:
    events = [e async for e in await client.responses.create(
        model="fake-model", input=ASK, tools=FLAT_TOOLS, tool_choice={"type": "function", "name": "get_weather"},
        max_output_tokens=200, temperature=1.0, parallel_tool_calls=False, stream=True, extra_body={"seed": 2})]
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["function_call"]  # type: ignore[union-attr]
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    [done] = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done.arguments == arguments  # type: ignore[union-attr]
    jsonschema.validate(json.loads(arguments), WEATHER_PARAMETERS)
    final = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in final.output] == ["function_call"]
    assert final.output[0].name == "get_weather" and final.output[0].arguments == arguments


async def test_an_earlier_responses_output_goes_back_in_as_input(client: openai.AsyncOpenAI) -> None:
    """The loop a tool-using client runs: the calls of one response and their outputs in the next one's input."""
    first = await client.responses.create(model="fake-model", input=ASK, tools=FLAT_TOOLS, tool_choice="required",
                                          max_output_tokens=200, temperature=1.0, extra_body={"seed": 3})
    calls = [item for item in first.output if item.type == "function_call"]
    outputs = [{"type": "function_call_output", "call_id": c.call_id, "output": "18 degrees"} for c in calls]
    second = await client.responses.create(
        model="fake-model", input=[*ASK, *[c.model_dump(exclude_none=True) for c in first.output], *outputs],
        tools=FLAT_TOOLS, max_output_tokens=8, **GREEDY)
    assert second.status in ("completed", "incomplete") and second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens  # type: ignore[union-attr]


class Person(BaseModel):
    name: str
    age: int


async def test_text_format_json_schema_is_enforced(client: openai.AsyncOpenAI) -> None:
    parsed = await client.responses.parse(model="fake-model", input="Who?", text_format=Person,
                                          max_output_tokens=300, temperature=1.0, extra_body={"seed": 4})
    assert isinstance(parsed.output_parsed, Person)


async def test_logprobs_ride_on_the_output_text(client: openai.AsyncOpenAI) -> None:
    response = await client.responses.create(model="fake-model", input="hello", max_output_tokens=4, top_logprobs=2,
                                             include=["message.output_text.logprobs"], **GREEDY)
    part = response.output[0].content[0]  # type: ignore[union-attr]
    assert part.logprobs is not None and len(part.logprobs) == 4
    assert all(len(lp.top_logprobs) == 2 for lp in part.logprobs)
    assert "".join(lp.token for lp in part.logprobs) == part.text


@pytest.mark.parametrize(("body", "param", "words"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id", "send the whole conversation"),
    ({"conversation": "conv_1"}, "conversation", "send the whole conversation"),
    ({"background": True}, "background", "foreground"),
    ({"truncation": "auto"}, "truncation", "never drops"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "function tools only"),
    ({"text": {"format": {"type": "xml"}}}, "text.format.type", "json_schema"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0]", "text only"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]", "item_reference"),
    ({"input": [{"type": "computer_call_output"}]}, "input[0].type", "function_call_output"),
    ({"input": []}, "input", "at least one item"),
    ({"tool_choice": {"type": "file_search"}}, "tool_choice", "\"required\""),
    ({"top_logprobs": 50}, "top_logprobs", "between 0 and 20"),
    # the chat path's checks, in this body's words
    ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role", "for input[0].role"),
    ({"instructions": "Be brief.", "input": [{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}]},
     "input[1].role", "'wizard'"),
    ({"input": [{"role": "user", "content": "a"}, {"type": "function_call", "call_id": "c1", "name": "f",
                                                   "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
                {"role": "wizard", "content": "b"}]}, "input[3].role", "'wizard'"),
    ({"max_output_tokens": 0}, "max_output_tokens", "max_output_tokens must be at least 1"),
    ({"tools": [{"type": "function", "parameters": {}}]}, "tools[0].name", "tools[0].name must be"),
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "nonsense"}}}},
     "text.format.schema", "text.format.schema is not a valid JSON Schema"),
])
async def test_what_pier_cannot_do_is_a_400_that_says_what_to_send(
    client: openai.AsyncOpenAI, body: dict[str, Any], param: str, words: str,
) -> None:
    request = {"model": "fake-model", "input": "hello", **body}
    with pytest.raises(openai.BadRequestError) as raised:
        await client.post("/responses", body=request, cast_to=httpx.Response)
    error = raised.value.body
    assert isinstance(error, dict) and error["param"] == param and words in error["message"], error


async def test_a_stored_response_is_not_found(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        await client.responses.retrieve("resp_123")
    assert "pier keeps no responses" in str(raised.value)
    with pytest.raises(openai.NotFoundError):
        await client.responses.delete("resp_123")
