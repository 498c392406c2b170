"""Structured output through each API over the fake runner: OpenAI's response_format on chat and completions
(streamed too), TGI's grammar (json, regex) on /generate, /generate_stream and /invocations. Every answer
parses and validates; what a grammar cannot enforce is checked after generation and the answer says so
(`schema_check` on OpenAI's choice, a header on TGI's); an invalid schema is a 400/422 in the API's shape."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from pier.engine.fake import FakeRunner
from pier.server.structured import response_format_grammar, tgi_grammar
from tests.server.conftest import app_client, sse_data
from tests.server.flavors.tgi_generate_schema import validator as tgi_schema

pytestmark = pytest.mark.anyio

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer"}, "admin": {"type": "boolean"}},
          "required": ["name", "age", "admin"], "additionalProperties": False}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}
PHONE = r"\d{3}-\d{4}"


def runner() -> FakeRunner:
    return FakeRunner(n_ctx=1024, n_seq_max=16, n_batch=64)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
async def test_chat_json_schema_validates_whole_and_streamed(temperature: float) -> None:
    async with app_client(runner()) as client:
        for seed in range(4):
            body = {"messages": [{"role": "user", "content": f"hello {seed}"}], "response_format": JSON_SCHEMA,
                    "temperature": temperature, "seed": seed, "max_tokens": 200}
            whole = (await client.post("/v1/chat/completions", json=body)).json()
            assert whole["choices"][0]["finish_reason"] == "stop"
            jsonschema.validate(json.loads(whole["choices"][0]["message"]["content"]), PERSON)
            streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
            events = [json.loads(d) for d in sse_data(streamed.text)[:-1]]
            text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
            assert text == whole["choices"][0]["message"]["content"]


async def test_completions_json_object_is_one_json_object() -> None:
    async with app_client(runner()) as client:
        for seed in range(6):
            body = {"prompt": "hello", "response_format": {"type": "json_object"}, "temperature": 0.8,
                    "seed": seed, "max_tokens": 300}
            choice = (await client.post("/v1/completions", json=body)).json()["choices"][0]
            if choice["finish_reason"] == "stop":  # an open object may run past max_tokens, as on OpenAI
                assert isinstance(json.loads(choice["text"]), dict)


async def test_tgi_json_grammar_on_generate_stream_and_invocations() -> None:
    grammar = {"type": "json", "value": PERSON}
    tgi_schema("GrammarType").validate(grammar)  # the payloads are TGI's
    async with app_client(runner()) as client:
        generated = (await client.post("/generate", json={
            "inputs": "hello", "parameters": {"grammar": grammar, "max_new_tokens": 200, "details": True}})).json()
        tgi_schema("GenerateResponse").validate(generated)
        jsonschema.validate(json.loads(generated["generated_text"]), PERSON)
        as_string = {"type": "json", "value": json.dumps(PERSON)}  # TGI takes the schema as a JSON string too
        invoked = (await client.post("/invocations", json={
            "inputs": "hello", "parameters": {"grammar": as_string, "do_sample": True, "seed": 3,
                                              "max_new_tokens": 200}})).json()
        assert invoked[0]["generated_text"].startswith("hello")  # /invocations returns the full text
        jsonschema.validate(json.loads(invoked[0]["generated_text"].removeprefix("hello")), PERSON)
        streamed = await client.post("/generate_stream", json={
            "inputs": "hello", "parameters": {"grammar": grammar, "do_sample": True, "seed": 5,
                                              "max_new_tokens": 200}})
        events = [json.loads(d) for d in sse_data(streamed.text)]
        for event in events:
            tgi_schema("StreamResponse").validate(event)
        jsonschema.validate(json.loads(events[-1]["generated_text"]), PERSON)


async def test_tgi_regex_grammar_matches_whole() -> None:
    tgi_schema("GrammarType").validate({"type": "regex", "value": PHONE})
    async with app_client(runner()) as client:
        for seed in range(5):
            answer = (await client.post("/generate", json={"inputs": "hello", "parameters": {
                "grammar": {"type": "regex", "value": PHONE}, "do_sample": True, "seed": seed}})).json()
            assert re.fullmatch(PHONE, answer["generated_text"]), answer


async def test_tgi_messages_api_takes_tgi_s_grammar_shape_as_response_format() -> None:
    async with app_client(runner()) as client:
        answer = (await client.post("/invocations", json={
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "regex", "value": "(yes|no)"}})).json()
    assert answer["choices"][0]["message"]["content"] in ("yes", "no")


@pytest.mark.parametrize(("parameters", "fragment"), [
    ({"grammar": {"type": "regex", "value": "(?=a)b"}}, "lookahead"),
    ({"grammar": {"type": "json", "value": {"type": "integer", "maximum": "3"}}}, "not a valid JSON Schema"),
    ({"grammar": {"type": "json", "value": "{not json"}}, "not JSON"),
    ({"grammar": {"type": "xml", "value": "x"}}, "`grammar.type` must be"),
    ({"grammar": "json"}, "`grammar` must be"),
])
async def test_tgi_grammar_it_cannot_enforce_is_a_422(parameters: dict[str, Any], fragment: str) -> None:
    async with app_client(runner()) as client:
        response = await client.post("/generate", json={"inputs": "hello", "parameters": parameters})
    assert response.status_code == 422, response.text
    assert response.json()["error_type"] == "validation" and fragment in response.json()["error"]


@pytest.mark.parametrize(("response_format", "param", "fragment"), [
    ({"type": "json_schema"}, "response_format", "needs a `json_schema` object"),
    ({"type": "yaml"}, "response_format", "not one of"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/gone"}}},
     "response_format.json_schema.schema", "points at nothing"),
])
async def test_openai_response_format_it_cannot_enforce_is_a_400(
    response_format: dict[str, Any], param: str, fragment: str,
) -> None:
    async with app_client(runner()) as client:
        response = await client.post("/v1/completions", json={"prompt": "hi", "response_format": response_format})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and fragment in error["message"]


@pytest.mark.parametrize(("given", "grammar"), [
    (None, None), ({"type": "text"}, None),
    ({"type": "json_object"}, "root ::= object"),
    (JSON_SCHEMA, 'm0 ::= "\\"name\\"" space ":" space name m1c'),
])
def test_response_format_maps_to_a_grammar(given: dict[str, Any] | None, grammar: str | None) -> None:
    made = response_format_grammar(given)
    assert made == grammar if grammar is None else (made is not None and grammar in made)


def test_tgi_json_schema_spelling_of_tgi_3_is_the_same_grammar() -> None:
    assert tgi_grammar({"type": "json_schema", "value": {"name": "p", "schema": PERSON}}) == \
        tgi_grammar({"type": "json", "value": PERSON})


UNIQUE = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                                             "maximum": 3},
                                                "minItems": 3, "maxItems": 3, "uniqueItems": True}},
          "required": ["ids"], "additionalProperties": False}


def _expected_report(text: str) -> dict[str, Any]:
    ids = json.loads(text)["ids"]
    valid = len(set(ids)) == len(ids)
    return {"valid": valid, "checked_after_generation": ["uniqueItems"],
            "violations": [] if valid else [f"/ids: {ids} has non-unique elements"]}


async def test_a_keyword_checked_after_generation_is_reported_on_the_choice_whole_and_streamed() -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "u", "schema": UNIQUE}}
    seen = set()
    async with app_client(runner()) as client:
        for seed in range(8):
            body = {"messages": [{"role": "user", "content": "hi"}], "response_format": fmt, "seed": seed,
                    "max_tokens": 100}
            response = await client.post("/v1/chat/completions", json=body)
            assert response.status_code == 200, response.text
            choice = response.json()["choices"][0]
            assert choice["finish_reason"] == "stop"
            report = choice["schema_check"]
            assert report == _expected_report(choice["message"]["content"])
            seen.add(report["valid"])
            streamed = await client.post("/v1/chat/completions", json={**body, "stream": True})
            last = json.loads(sse_data(streamed.text)[-2])["choices"][0]
            assert last["finish_reason"] == "stop" and last["schema_check"] == report
    assert seen == {True, False}  # random ids repeat sometimes: both outcomes were checked


async def test_a_fully_enforced_schema_adds_nothing_to_the_answer() -> None:
    async with app_client(runner()) as client:
        answer = (await client.post("/v1/completions", json={"prompt": "hi", "response_format": JSON_SCHEMA,
                                                             "max_tokens": 200})).json()
    assert "schema_check" not in answer["choices"][0]


async def test_tgi_messages_api_reports_the_check_on_its_choice() -> None:
    async with app_client(runner()) as client:
        answer = (await client.post("/invocations", json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100,
            "response_format": {"type": "json", "value": UNIQUE}})).json()
    choice = answer["choices"][0]
    assert choice["schema_check"] == _expected_report(choice["message"]["content"])


async def test_tgi_generate_says_what_the_check_found_in_a_header() -> None:
    async with app_client(runner()) as client:
        response = await client.post("/generate", json={"inputs": "hi", "parameters": {
            "grammar": {"type": "json", "value": UNIQUE}, "max_new_tokens": 100}})
    assert response.status_code == 200, response.text
    tgi_schema("GenerateResponse").validate(response.json())
    assert json.loads(response.headers["x-pier-schema-check"]) == _expected_report(response.json()["generated_text"])
