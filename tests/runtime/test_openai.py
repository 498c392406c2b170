"""OpenAI passthrough through the gateway, driven by the openai client, to pier's model server (fake engine)."""

from __future__ import annotations

import httpx
import openai
import pytest

from pier.runtime.settings import RuntimeSettings
from tests.runtime.servers import CopyServer, Gateway, SlowRunner, copy_server, gateway

MESSAGES = [{"role": "user", "content": "hello world"}]


def client(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30)


def test_chat_through_the_endpoint_url_matches_the_copy(gw: Gateway, copy: CopyServer) -> None:
    direct = client(copy.url + "/v1").chat.completions.create(model="x", messages=MESSAGES, max_tokens=5, temperature=0)  # type: ignore[arg-type]
    through = client(gw.url + "/endpoints/llm/v1").chat.completions.create(
        model="anything", messages=MESSAGES, max_tokens=5, temperature=0)  # type: ignore[arg-type]
    assert through.choices[0].message.content == direct.choices[0].message.content
    chunks = list(client(gw.url + "/endpoints/llm/v1").chat.completions.create(
        model="anything", messages=MESSAGES, max_tokens=5, temperature=0, stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == direct.choices[0].message.content
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == through.usage.completion_tokens  # type: ignore[union-attr]


def test_completions_with_the_endpoint_as_model(gw: Gateway) -> None:
    answer = client(gw.url + "/v1").completions.create(model="llm", prompt="hello", max_tokens=3, temperature=0)
    assert answer.usage is not None and answer.usage.completion_tokens <= 3
    streamed = client(gw.url + "/v1").completions.create(model="llm/ic", prompt="hello", max_tokens=3, temperature=0,
                                                        stream=True)
    assert "".join(c.choices[0].text for c in streamed) == answer.choices[0].text


def test_a_copys_error_passes_through_unchanged(gw: Gateway, copy: CopyServer) -> None:
    bad = {"model": "llm", "messages": MESSAGES, "max_tokens": -1}
    direct = httpx.post(copy.url + "/v1/chat/completions", json=bad)
    through = httpx.post(gw.url + "/v1/chat/completions", json=bad)
    assert (through.status_code, through.json()) == (direct.status_code, direct.json())
    with pytest.raises(openai.BadRequestError):
        client(gw.url + "/v1").chat.completions.create(model="llm", messages=MESSAGES, max_tokens=-1, stream=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "status", "code", "words"),
    [
        ({"model": "missing", "prompt": "x"}, 404, "model_not_found", "Endpoint missing of account"),
        ({"prompt": "x"}, 400, "invalid_request", "Set `model`"),
        ({"model": "bad_name", "prompt": "x"}, 400, "invalid_request", "endpointName"),
        ({"model": "llm", "prompt": "x", "stream": "maybe"}, 400, "invalid_request", "`stream`"),
    ],
)
def test_gateway_errors_take_openais_shape(gw: Gateway, body: dict[str, object], status: int, code: str,
                                           words: str) -> None:
    answer = httpx.post(gw.url + "/v1/completions", json=body)
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["code"] == code and words in error["message"] and error["type"]


@pytest.mark.parametrize(("model", "status"), [("missing", 404), ("bad_name", 400), ("llm/bad name", 400)])
def test_a_model_the_gateway_cannot_resolve_is_named_as_the_param_at_fault(gw: Gateway, model: str,
                                                                             status: int) -> None:
    """On /v1/ the body's `model` is what names the endpoint: the error points the openai client's user there."""
    answer = httpx.post(gw.url + "/v1/completions", json={"model": model, "prompt": "x"})
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["param"] == "model" and "GET /v1/models lists" in error["message"], error


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions"])
def test_nulls_for_optional_fields_are_their_defaults_through_the_gateway(gw: Gateway, path: str) -> None:
    """OpenAI takes null for every optional field (LiteLLM and JS clients send them): `"stream": null` is no stream,
    `"n": null` one choice, at the gateway and at the copy."""
    nulls = {"stream": None, "n": None, "stream_options": None, "ignore_eos": None, "min_tokens": None}
    fields = {"messages": MESSAGES} if path.endswith("chat/completions") else {"prompt": "hi", "echo": None}
    answer = httpx.post(gw.url + path, json={"model": "llm", "max_tokens": 2, **fields, **nulls})
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["choices"]) == 1


def test_invalid_json_is_a_400(gw: Gateway) -> None:
    answer = httpx.post(gw.url + "/v1/completions", content=b"{nope")
    assert answer.status_code == 400 and "Invalid request body" in answer.json()["error"]["message"]


def test_a_stream_past_its_total_bound_ends_with_an_error_event() -> None:
    settings = RuntimeSettings(openai_deadline_s=1.0, stream_total_s=1.0)
    with copy_server(SlowRunner(0.05)) as slow, gateway(settings) as gw:
        gw.route("llm", [slow.status("slow-1")])
        stream = client(gw.url + "/v1").completions.create(model="llm", prompt="hello", max_tokens=500, stream=True)
        texts = []
        with pytest.raises(openai.APIError, match=r"still running after 1\.0 s"):
            for chunk in stream:
                texts.append(chunk.choices[0].text)
        assert texts


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"]}}}


@pytest.mark.parametrize("path", ["/endpoints/llm/v1", "/endpoints/llm/openai/v1", "/v1"])
def test_tool_calls_through_the_gateway(gw: Gateway, copy: CopyServer, path: str) -> None:
    fields = {"model": "llm", "messages": MESSAGES, "tools": [WEATHER_TOOL], "max_tokens": 100, "temperature": 0,
              "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    direct = client(copy.url + "/v1").chat.completions.create(**fields)  # type: ignore[call-overload]
    through = client(gw.url + path).chat.completions.create(**fields)  # type: ignore[call-overload]
    [call] = through.choices[0].message.tool_calls
    assert through.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert call.function.arguments == direct.choices[0].message.tool_calls[0].function.arguments
    streamed = "".join(d.function.arguments or "" for c in client(gw.url + path).chat.completions.create(
        **fields, stream=True) for d in (c.choices[0].delta.tool_calls or []) if c.choices and d.function)
    assert streamed == call.function.arguments
    with pytest.raises(openai.BadRequestError, match="not in tools"):
        client(gw.url + path).chat.completions.create(**{**fields, "tool_choice": {  # type: ignore[call-overload]
            "type": "function", "function": {"name": "get_news"}}})


@pytest.mark.parametrize(("messages", "param", "words"), [
    ([{"role": "wizard", "content": "hi"}], "messages[0].role", "Invalid value: 'wizard'"),
    ([{"role": "system", "content": "be brief"}, {"role": "user", "content": None}], "messages[1].content",
     "got null"),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}], "messages[1].content",
     "unless it has tool_calls"),
], ids=["unknown role", "null user content", "null assistant content without calls"])
def test_openai_refuses_bad_messages_with_a_400_at_the_copy_and_through_the_gateway(
        gw: Gateway, copy: CopyServer, messages: list[dict[str, object]], param: str, words: str) -> None:
    for base in (copy.url + "/v1", gw.url + "/v1"):
        with pytest.raises(openai.BadRequestError) as raised:
            client(base).chat.completions.create(model="llm", messages=messages, max_tokens=5)  # type: ignore[arg-type]
        error = raised.value.body
        assert isinstance(error, dict) and error["param"] == param and words in error["message"], error
        assert error["type"] == "invalid_request_error"


def test_an_assistant_message_that_only_calls_tools_is_taken(gw: Gateway) -> None:
    messages = [{"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]
    answer = client(gw.url + "/v1").chat.completions.create(model="llm", messages=messages,  # type: ignore[arg-type]
                                                            max_tokens=3)
    assert answer.choices[0].message.role == "assistant"


@pytest.mark.parametrize("path", ["/endpoints/llm/v1", "/endpoints/llm/openai/v1", "/v1"])
def test_responses_through_the_gateway_match_the_copy(gw: Gateway, copy: CopyServer, path: str) -> None:
    fields = {"model": "llm", "instructions": "Be brief.", "input": "hello world", "max_output_tokens": 5,
              "temperature": 0}
    direct = client(copy.url + "/v1").responses.create(**fields)  # type: ignore[call-overload]
    through = client(gw.url + path).responses.create(**fields)  # type: ignore[call-overload]
    assert through.output_text == direct.output_text and through.model == "llm"
    events = list(client(gw.url + path).responses.create(**fields, stream=True))  # type: ignore[call-overload]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == direct.output_text
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].type == "response.incomplete"


@pytest.mark.parametrize("path", ["/v1", "/endpoints/llm/v1", "/endpoints/llm/inference-components/ic/openai/v1"])
def test_a_stored_response_is_not_found_at_the_gateway(gw: Gateway, path: str) -> None:
    with pytest.raises(openai.NotFoundError, match="pier keeps no responses"):
        client(gw.url + path).responses.retrieve("resp_1")
    answer = httpx.delete(gw.url + path + "/responses/resp_1")
    assert answer.status_code == 404 and answer.json()["error"]["param"] == "response_id"


def test_a_responses_stream_past_its_total_bound_ends_with_an_error_event() -> None:
    settings = RuntimeSettings(openai_deadline_s=1.0, stream_total_s=1.0)
    with copy_server(SlowRunner(0.05)) as slow, gateway(settings) as gw:
        gw.route("llm", [slow.status("slow-1")])
        with httpx.stream("POST", gw.url + "/v1/responses", json={
                "model": "llm", "input": "hello", "max_output_tokens": 500, "stream": True}, timeout=30) as answer:
            blocks = [b for b in answer.read().decode().split("\n\n") if b.strip()]
    name, data = blocks[-1].split("\n")
    assert name == "event: error" and "still running after 1.0 s" in data
    assert all(not b.startswith("data: [DONE]") for b in blocks)
