"""Tools on TGI's Messages API (/invocations), checked against TGI's own schema for tool calls (docs/openapi.json
of huggingface/text-generation-inference, 2.4: ToolCallMessage, ToolCall, FunctionDefinition, ToolCallDelta,
DeltaToolCall, Function), with `additionalProperties: false` added as in test_tgi_messages."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonschema
import pytest
from jsonschema import Draft202012Validator

from pier.engine.fake import FakeRunner
from tests.server.conftest import app_client
from tests.server.flavors.test_openai_tools import SCHEMAS, TOOLS
from tests.server.flavors.test_tgi_messages import TGI_2_0_SCHEMAS, TGI_FINISH_REASONS, chunks_of

pytestmark = pytest.mark.anyio

TGI_TOOL_SCHEMAS: dict[str, Any] = {
    **TGI_2_0_SCHEMAS,
    "ToolCallMessage": {"type": "object", "additionalProperties": False, "required": ["role", "tool_calls"],
                        "properties": {"role": {"type": "string"},
                                       "tool_calls": {"type": "array", "items": {"$ref": "#/$defs/ToolCall"}}}},
    "ToolCall": {"type": "object", "additionalProperties": False, "required": ["id", "type", "function"],
                 "properties": {"id": {"type": "string"}, "type": {"type": "string"},
                                "function": {"$ref": "#/$defs/FunctionDefinition"}}},
    "FunctionDefinition": {"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                           "properties": {"arguments": {}, "description": {"type": ["string", "null"]},
                                          "name": {"type": "string"}}},
    "ToolCallDelta": {"type": "object", "additionalProperties": False, "required": ["role", "tool_calls"],
                      "properties": {"role": {"type": "string"}, "tool_calls": {"$ref": "#/$defs/DeltaToolCall"}}},
    "DeltaToolCall": {"type": "object", "additionalProperties": False, "required": ["index", "id", "type", "function"],
                      "properties": {"index": {"type": "integer", "minimum": 0}, "id": {"type": "string"},
                                     "type": {"type": "string"}, "function": {"$ref": "#/$defs/Function"}}},
    "Function": {"type": "object", "additionalProperties": False, "required": ["arguments"],
                 "properties": {"arguments": {"type": "string"}, "name": {"type": ["string", "null"]}}},
}


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(FakeRunner(n_ctx=2048, n_seq_max=16, n_batch=64)) as http:  # the tools' prompt is long
        yield http


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({**TGI_TOOL_SCHEMAS[name], "$defs": TGI_TOOL_SCHEMAS})


ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
FORCED = {"messages": ASK, "tools": TOOLS, "tool_choice": {"function": {"name": "get_weather"}}, "max_tokens": 200,
          "temperature": 0}


async def test_a_forced_call_in_tgis_shape(client: httpx.AsyncClient) -> None:
    response = await client.post("/invocations", json=FORCED)
    assert response.status_code == 200, response.text
    body = response.json()
    [choice] = body["choices"]
    errors = [e.message for e in validator("ToolCallMessage").iter_errors(choice["message"])]
    assert not errors, (errors, choice["message"])
    [call] = choice["message"]["tool_calls"]
    assert call["id"] == "0" and call["function"]["name"] == "get_weather"
    jsonschema.validate(call["function"]["arguments"], SCHEMAS["get_weather"])  # an object, as TGI sends it
    assert choice["finish_reason"] in TGI_FINISH_REASONS


async def test_a_streamed_call_in_tgis_chunks(client: httpx.AsyncClient) -> None:
    whole = (await client.post("/invocations", json=FORCED)).json()
    chunks = chunks_of(await client.post("/invocations", json={**FORCED, "stream": True}))
    delta_schema, chunk_schema = validator("ToolCallDelta"), validator("ChatCompletionChunk")
    arguments, names = "", []
    for chunk in chunks[:-1]:
        delta = chunk["choices"][0]["delta"]
        assert not [e.message for e in delta_schema.iter_errors(delta)], delta
        call = delta["tool_calls"]
        names += [call["function"]["name"]] if call["function"]["name"] else []
        arguments += call["function"]["arguments"]
    last = chunks[-1]
    assert not [e.message for e in chunk_schema.iter_errors(last)]
    assert last["choices"][0]["finish_reason"] in TGI_FINISH_REASONS
    assert names == ["get_weather"]
    assert json.loads(arguments) == whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]


async def test_tool_prompt_introduces_the_tools_and_a_bad_choice_is_tgis_422(client: httpx.AsyncClient) -> None:
    plain = (await client.post("/invocations", json={**FORCED, "max_tokens": 1})).json()
    prompted = (await client.post("/invocations", json={**FORCED, "max_tokens": 1,
                                                         "tool_prompt": "Tools follow. " * 20})).json()
    assert prompted["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"]
    bad = await client.post("/invocations", json={**FORCED, "tool_choice": {"function": {"name": "get_news"}}})
    assert bad.status_code == 422 and bad.json()["error_type"] == "validation"
    assert "get_news" in bad.json()["error"]
