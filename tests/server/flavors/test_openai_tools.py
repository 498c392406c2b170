"""Tools on the OpenAI route with the `openai` client, over a real engine on the fake runner. The fake model's
template knows no tools, so they go through pier's fallback prompt and calls are read in the Hermes format; a
forced choice makes the (random) fake model write a valid call through the grammar."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import openai
import pytest

from pier.engine.fake import FakeRunner
from tests.server.conftest import app_client, sse_data

pytestmark = pytest.mark.anyio

WEATHER_PARAMETERS = {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                     "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
    "required": ["city", "unit"],
}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                      "parameters": WEATHER_PARAMETERS}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now",
                                      "parameters": {"type": "object", "properties": {}}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]


@pytest.fixture
async def client() -> AsyncIterator[openai.AsyncOpenAI]:
    async with app_client(FakeRunner(n_ctx=2048, n_seq_max=16, n_batch=64)) as http:
        yield openai.AsyncOpenAI(base_url="http://pier/v1", api_key="none", http_client=http, max_retries=0)


def check_call(name: str, arguments: str) -> dict[str, Any]:
    value = json.loads(arguments)
    jsonschema.validate(value, SCHEMAS[name])
    return value


@pytest.mark.parametrize("seed", range(4))
async def test_required_always_gives_valid_calls(client: openai.AsyncOpenAI, seed: int) -> None:
    answer = await client.chat.completions.create(
        model="fake-model", messages=ASK, tools=TOOLS, tool_choice="required", max_tokens=200, seed=seed,
        temperature=1.0, parallel_tool_calls=False,  # the random model would go on calling until max_tokens
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_") and len(call.id) == 29
    check_call(call.function.name, call.function.arguments)
    assert choice.message.content is None


async def test_a_named_choice_calls_that_function(client: openai.AsyncOpenAI) -> None:
    answer = await client.chat.completions.create(
        model="fake-model", messages=ASK, tools=TOOLS, max_tokens=200, temperature=0,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    [call] = answer.choices[0].message.tool_calls or []
    assert call.function.name == "get_time" and json.loads(call.function.arguments) == {}
    assert answer.choices[0].finish_reason == "tool_calls"


async def test_the_stream_sends_the_same_calls_as_deltas(client: openai.AsyncOpenAI) -> None:
    fields: dict[str, Any] = {"model": "fake-model", "messages": ASK, "tools": TOOLS, "tool_choice": "required",
                              "max_tokens": 200, "temperature": 0, "parallel_tool_calls": False}
    whole = await client.chat.completions.create(**fields)
    stream = await client.chat.completions.create(**fields, stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                if delta.index not in calls:  # a call's first delta: its id and name, before any argument
                    assert delta.id and delta.function and delta.function.name and delta.type == "function"
                    assert delta.function.arguments == ""
                    calls[delta.index] = {"id": delta.id, "name": delta.function.name, "arguments": ""}
                else:
                    assert delta.id is None and delta.function and delta.function.name is None
                    calls[delta.index]["arguments"] += delta.function.arguments or ""
            assert not choice.delta.content  # a forced answer is only calls
    assert finish == "tool_calls"
    expected = whole.choices[0].message.tool_calls or []
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (c.function.name, c.function.arguments) for c in expected]
    assert sum(len(c["arguments"]) > 0 for c in calls.values()) == len(expected)


async def test_a_call_cut_by_max_tokens_ends_with_length_whole_and_streamed(client: openai.AsyncOpenAI) -> None:
    """As OpenAI answers: `length`, never `tool_calls`, when max_tokens cut the answer; a client that runs the calls
    of a `tool_calls` answer would otherwise run one whose arguments were cut off (the stream announced it)."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    fields: dict[str, Any] = {"model": "fake-model", "messages": ASK, "tools": TOOLS, "max_tokens": 60,
                              "temperature": 0, "tool_choice": named}
    whole = await client.chat.completions.create(**fields)
    assert whole.choices[0].finish_reason == "length"
    finishes, names = [], []
    async for chunk in await client.chat.completions.create(**fields, stream=True):
        for choice in chunk.choices:
            finishes += [choice.finish_reason] if choice.finish_reason else []
            names += [d.function.name for d in choice.delta.tool_calls or [] if d.function and d.function.name]
    assert names == ["get_weather"] and finishes == ["length"]  # announced, then cut


async def test_auto_and_none_leave_the_fake_models_words_as_content(client: openai.AsyncOpenAI) -> None:
    for choice_value in ("auto", "none"):
        answer = await client.chat.completions.create(model="fake-model", messages=ASK, tools=TOOLS, max_tokens=8,
                                                      tool_choice=choice_value, temperature=0)
        assert answer.choices[0].message.tool_calls is None and answer.choices[0].message.content
        assert answer.choices[0].finish_reason == "length"


def round_trip(result: str) -> list[Any]:
    return [*ASK,
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": result}]


async def test_a_tool_result_goes_into_the_prompt(client: openai.AsyncOpenAI) -> None:
    short = await client.chat.completions.create(model="fake-model", messages=round_trip("sunny"), tools=TOOLS,
                                                 max_tokens=4, temperature=0)
    longer = await client.chat.completions.create(model="fake-model", messages=round_trip("sunny " * 10),
                                                  tools=TOOLS, max_tokens=4, temperature=0)
    assert short.usage and longer.usage
    assert longer.usage.prompt_tokens > short.usage.prompt_tokens  # the tool message is rendered, not dropped
    assert short.choices[0].message.content


@pytest.mark.parametrize(("fields", "param", "words"), [
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "get_news"}}}, "tool_choice",
     "not in tools"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]},
     "tools[0].function.parameters", "Invalid schema for function 'f'"),
    ({"tool_choice": "required"}, "tool_choice", "requires tools"),
    ({"tools": TOOLS, "tool_choice": "always"}, "tool_choice", "must be"),
])
async def test_bad_tools_are_400s_in_openais_shape(client: openai.AsyncOpenAI, fields: dict[str, Any], param: str,
                                                   words: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        await client.chat.completions.create(model="fake-model", messages=ASK, max_tokens=4, **fields)
    error = refused.value.body
    assert isinstance(error, dict) and error["param"] == param and words in error["message"]
    assert error["type"] == "invalid_request_error"


async def test_a_tool_message_without_a_role_the_template_knows_is_still_answered() -> None:
    """Raw JSON (no client-side types): an assistant message whose arguments are an object, as TGI clients send."""
    async with app_client() as http:
        history = round_trip("12:00")
        history[1]["tool_calls"][0]["function"]["arguments"] = {"city": "Paris", "unit": "celsius"}
        response = await http.post("/v1/chat/completions", json={"messages": history, "max_tokens": 3})
        assert response.status_code == 200, response.text
        bad = await http.post("/v1/chat/completions", json={
            "messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}]})
        assert bad.status_code == 400 and isinstance(bad.json()["error"]["message"], str)


ARGUMENTS = '{"city": "Paris", "unit": "celsius"}'
ANSWER_WITH_A_CALL = f'Let me check.\n<tool_call>\n{{"name": "get_weather", "arguments": {ARGUMENTS}}}\n</tool_call>'


async def scripted_client(prompt_tokens: int, answer: str = ANSWER_WITH_A_CALL) -> AsyncIterator[openai.AsyncOpenAI]:
    """The fake model made to write `answer` byte by byte, then EOS."""
    script = {prompt_tokens + i: FakeRunner.FIRST_BYTE + b for i, b in enumerate(answer.encode())}
    script[prompt_tokens + len(answer.encode())] = FakeRunner.EOS
    async with app_client(FakeRunner(n_ctx=2048, script=script)) as http:
        yield openai.AsyncOpenAI(base_url="http://pier/v1", api_key="none", http_client=http, max_retries=0)


async def test_auto_reads_a_call_the_model_wrote_after_its_content(client: openai.AsyncOpenAI) -> None:
    fields: dict[str, Any] = {"model": "fake-model", "messages": ASK, "tools": TOOLS, "max_tokens": 300,
                              "temperature": 0}
    probe = await client.chat.completions.create(**{**fields, "max_tokens": 1})
    assert probe.usage
    async for scripted in scripted_client(probe.usage.prompt_tokens):
        whole = await scripted.chat.completions.create(**fields)
        message = whole.choices[0].message
        assert whole.choices[0].finish_reason == "tool_calls"
        assert message.content == "Let me check.\n"
        [call] = message.tool_calls or []
        assert (call.function.name, call.function.arguments) == ("get_weather", ARGUMENTS)
        content, arguments, finish = "", "", None
        async for chunk in await scripted.chat.completions.create(**fields, stream=True):
            for choice in chunk.choices:
                content += choice.delta.content or ""
                arguments += "".join(d.function.arguments or "" for d in choice.delta.tool_calls or [] if d.function)
                finish = choice.finish_reason or finish
                assert "<tool" not in (choice.delta.content or "")  # the marker's start was held back
        assert (content, arguments, finish) == ("Let me check.\n", ARGUMENTS, "tool_calls")
    unshown = {**fields, "tool_choice": "none"}  # no tools in the prompt, and the answer is not read for calls
    probe = await client.chat.completions.create(**{**unshown, "max_tokens": 1})
    assert probe.usage
    async for scripted in scripted_client(probe.usage.prompt_tokens):
        plain = await scripted.chat.completions.create(**unshown)
        assert plain.choices[0].message.content == ANSWER_WITH_A_CALL and plain.choices[0].finish_reason == "stop"
        assert plain.choices[0].message.tool_calls is None


async def test_under_auto_a_call_the_model_begins_is_held_to_its_schema(client: openai.AsyncOpenAI) -> None:
    """The lazy grammar wakes at the marker: the scripted model's "kelvin" is not a unit the schema allows, so it
    writes one that is, and the call is valid."""
    fields: dict[str, Any] = {"model": "fake-model", "messages": ASK, "tools": TOOLS, "max_tokens": 300,
                              "temperature": 0, "parallel_tool_calls": False}
    probe = await client.chat.completions.create(**{**fields, "max_tokens": 1})
    assert probe.usage
    async for scripted in scripted_client(probe.usage.prompt_tokens, ANSWER_WITH_A_CALL.replace("celsius", "kelvin")):
        answer = await scripted.chat.completions.create(**fields)
        [call] = answer.choices[0].message.tool_calls or []
        arguments = check_call(call.function.name, call.function.arguments)
        assert arguments["city"] == "Paris" and arguments["unit"] in ("celsius", "fahrenheit")
        assert answer.choices[0].message.content == "Let me check.\n"


async def test_several_choices_each_call_and_logprobs_ride_along(client: openai.AsyncOpenAI) -> None:
    answer = await client.chat.completions.create(
        model="fake-model", messages=ASK, tools=TOOLS, tool_choice="required", parallel_tool_calls=False, n=2,
        max_tokens=200, temperature=1.0, seed=3, logprobs=True)
    assert len(answer.choices) == 2
    assert len({c.id for choice in answer.choices for c in choice.message.tool_calls or []}) == 2  # ids distinct
    for choice in answer.choices:
        [call] = choice.message.tool_calls or []
        check_call(call.function.name, call.function.arguments)
        assert choice.finish_reason == "tool_calls" and choice.logprobs and choice.logprobs.content


async def test_a_forced_call_and_a_response_format_are_refused_together(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="cannot be combined with response_format"):
        await client.chat.completions.create(model="fake-model", messages=ASK, tools=TOOLS, tool_choice="required",
                                             response_format={"type": "json_object"}, max_tokens=4)


def family_template(sign: str) -> str:
    """A template that reads tools and shows a family's sign, as that family's templates do."""
    return ("{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>" + sign + "{% endif %}"
            "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>")


@pytest.mark.parametrize("sign", ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<|tool_call|>", " functools[",
                                  "<|START_ACTION|>", "<function="])
async def test_each_familys_forced_call_is_read_back_whole_and_streamed(sign: str) -> None:
    """The grammar writes the family's format and the family's parser reads it: a format either got wrong would
    leave the answer as content."""
    runner = FakeRunner(n_ctx=2048)
    runner.info = dataclasses.replace(runner.info, chat_template=family_template(sign))
    async with app_client(runner) as http:
        named = {"type": "function", "function": {"name": "get_weather"}}
        body = {"messages": ASK, "tools": TOOLS, "tool_choice": named, "max_tokens": 200, "temperature": 0}
        answer = (await http.post("/v1/chat/completions", json=body)).json()
        assert answer["choices"][0]["finish_reason"] == "tool_calls", answer
        [call] = answer["choices"][0]["message"]["tool_calls"]
        check_call(call["function"]["name"], call["function"]["arguments"])
        streamed = await http.post("/v1/chat/completions", json={**body, "stream": True})
        deltas = [d for data in sse_data(streamed.text) if data != "[DONE]"
                  for d in json.loads(data)["choices"][0]["delta"].get("tool_calls", [])]
        assert deltas[0]["function"]["name"] == "get_weather"
        assert "".join(d["function"]["arguments"] for d in deltas) == call["function"]["arguments"]
