"""The OpenAI flavor over a real engine on the fake runner."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from pier.engine.fake import FakeRunner
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client, sse_data

pytestmark = pytest.mark.anyio

THE, QUICK, BROWN, FOX, JUMPS = 261, 262, 263, 264, 265  # FakeRunner's word tokens
GREEDY = {"temperature": 0}


def scripted() -> FakeRunner:
    return FakeRunner(n_ctx=256, script={2: THE, 3: QUICK, 4: BROWN, 5: FOX, 6: JUMPS})


async def chat(client: httpx.AsyncClient, **body: Any) -> httpx.Response:
    payload = {"messages": [{"role": "user", "content": "hello world"}], **body}
    return await client.post("/v1/chat/completions", json=payload)


async def test_chat_completion_shape_and_usage(client: httpx.AsyncClient) -> None:
    response = await chat(client, max_tokens=5, **GREEDY)
    assert response.status_code == 200
    body = response.json()
    assert body["id"].startswith("chatcmpl-") and body["object"] == "chat.completion"
    assert body["model"] == "fake-model"
    (choice,) = body["choices"]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["total_tokens"] == usage["prompt_tokens"] + 5
    assert body["timings"]["predicted_n"] == 5 and body["timings"]["prompt_n"] == usage["prompt_tokens"]


async def test_chat_prompt_is_the_models_template(client: httpx.AsyncClient) -> None:
    """The fake model's template renders "<user>hello world<assistant>": the same text through
    /v1/completions must give the same greedy answer and prompt length."""
    via_chat = (await chat(client, max_tokens=6, **GREEDY)).json()
    via_text = (
        await client.post("/v1/completions", json={"prompt": "<user>hello world<assistant>", "max_tokens": 6, **GREEDY})
    ).json()
    assert via_chat["choices"][0]["message"]["content"] == via_text["choices"][0]["text"]
    assert via_chat["usage"]["prompt_tokens"] == via_text["usage"]["prompt_tokens"]


async def test_completion_token_ids_are_used_exactly(client: httpx.AsyncClient) -> None:
    as_text = (await client.post("/v1/completions", json={"prompt": "hello world", "max_tokens": 4, **GREEDY})).json()
    as_ids = (await client.post("/v1/completions", json={"prompt": [1, 259, 260], "max_tokens": 4, **GREEDY})).json()
    without_bos = (await client.post("/v1/completions", json={"prompt": [259, 260], "max_tokens": 4, **GREEDY})).json()
    assert as_text["usage"]["prompt_tokens"] == as_ids["usage"]["prompt_tokens"] == 3  # text gets BOS, ids do not
    assert as_text["choices"][0]["text"] == as_ids["choices"][0]["text"]
    assert without_bos["usage"]["prompt_tokens"] == 2
    assert as_text["object"] == "text_completion" and as_text["id"].startswith("cmpl-")


async def test_completion_defaults_to_16_tokens_like_openai(client: httpx.AsyncClient) -> None:
    body = (await client.post("/v1/completions", json={"prompt": [5, 6], "ignore_eos": True})).json()
    assert body["usage"]["completion_tokens"] == 16


async def test_chat_streams_deltas_then_done(client: httpx.AsyncClient) -> None:
    whole = (await chat(client, max_tokens=8, **GREEDY)).json()
    response = await chat(client, max_tokens=8, stream=True, stream_options={"include_usage": True}, **GREEDY)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    data = sse_data(response.text)
    assert data[-1] == "[DONE]"
    events = [json.loads(d) for d in data[:-1]]
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    text = "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    finish = [e for e in events if e["choices"] and e["choices"][0]["finish_reason"]]
    assert [e["choices"][0]["finish_reason"] for e in finish] == ["length"]
    assert finish[0]["timings"]["predicted_n"] == 8
    usage_event = events[-1]
    assert usage_event["choices"] == [] and usage_event["usage"] == whole["usage"]
    assert all(e["usage"] is None for e in events[:-1])


async def test_stream_without_include_usage_has_no_usage(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/completions", json={"prompt": "hello", "max_tokens": 3, "stream": True})
    events = [json.loads(d) for d in sse_data(response.text)[:-1]]
    assert events and all("usage" not in e for e in events)
    assert events[-1]["choices"][0]["finish_reason"] == "length"


async def test_stop_string_ends_before_it() -> None:
    async with app_client(scripted()) as client:
        body = (
            await client.post("/v1/completions", json={"prompt": [1, 5], "max_tokens": 5, "stop": ["brown"], **GREEDY})
        ).json()
    assert body["choices"][0]["text"] == " the quick "
    assert body["choices"][0]["finish_reason"] == "stop"


async def test_stop_token_ids_and_logit_bias() -> None:
    async with app_client(scripted()) as client:
        by_token = (
            await client.post(
                "/v1/completions", json={"prompt": [1, 5], "max_tokens": 5, "stop_token_ids": [BROWN], **GREEDY}
            )
        ).json()
        biased = (
            await client.post(
                "/v1/completions", json={"prompt": [1, 9], "max_tokens": 3, "logit_bias": {str(FOX): 500}, **GREEDY}
            )
        ).json()
    assert by_token["choices"][0]["text"] == " the quick" and by_token["choices"][0]["finish_reason"] == "stop"
    assert biased["choices"][0]["text"] == " fox fox fox"


async def test_eos_ignore_eos_and_min_tokens() -> None:
    async with app_client(FakeRunner(n_ctx=256, eos_every=5)) as client:

        async def complete(**extra: Any) -> dict[str, Any]:
            body = {"prompt": [1, 5], "max_tokens": 10, **GREEDY, **extra}
            return (await client.post("/v1/completions", json=body)).json()

        stopped, ignoring, at_least = await complete(), await complete(ignore_eos=True), await complete(min_tokens=6)
    # EOS is the 4th token after a 2-token prompt; it counts as a completion token, as vLLM counts it
    assert stopped["choices"][0]["finish_reason"] == "stop" and stopped["usage"]["completion_tokens"] == 4
    assert ignoring["choices"][0]["finish_reason"] == "length" and ignoring["usage"]["completion_tokens"] == 10
    assert at_least["usage"]["completion_tokens"] >= 6


async def test_seed_makes_sampling_repeatable(client: httpx.AsyncClient) -> None:
    body = {
        "prompt": "hello",
        "max_tokens": 12,
        "temperature": 1.5,
        "top_k": 50,
        "top_p": 0.95,
        "min_p": 0.01,
        "presence_penalty": 0.5,
        "frequency_penalty": 0.5,
        "repetition_penalty": 1.1,
    }
    first = (await client.post("/v1/completions", json={**body, "seed": 2**40 + 7})).json()
    again = (await client.post("/v1/completions", json={**body, "seed": 2**40 + 7})).json()
    other = (await client.post("/v1/completions", json={**body, "seed": 8})).json()
    assert first["choices"][0]["text"] == again["choices"][0]["text"]
    assert first["choices"][0]["text"] != other["choices"][0]["text"]


async def test_max_completion_tokens_wins_over_max_tokens(client: httpx.AsyncClient) -> None:
    body = (await chat(client, max_tokens=9, max_completion_tokens=2, ignore_eos=True)).json()
    assert body["usage"]["completion_tokens"] == 2


async def test_echo_prepends_the_prompt(client: httpx.AsyncClient) -> None:
    body = (await client.post("/v1/completions", json={"prompt": "hello world", "max_tokens": 2, "echo": True})).json()
    assert body["choices"][0]["text"].startswith("hello world")


async def test_text_content_parts_are_joined(client: httpx.AsyncClient) -> None:
    parts = [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}]
    as_parts = (
        await client.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": parts}], "max_tokens": 3, **GREEDY}
        )
    ).json()
    as_text = (
        await client.post(
            "/v1/completions", json={"prompt": "<user>hello\nworld<assistant>", "max_tokens": 3, **GREEDY}
        )
    ).json()
    assert as_parts["choices"][0]["message"]["content"] == as_text["choices"][0]["text"]


async def test_an_assistant_refusal_part_in_the_history_is_its_text(client: httpx.AsyncClient) -> None:
    """OpenAI's assistant messages may hold `refusal` parts (what the model said when it refused): a conversation
    sent back with one goes on, the refusal read as the assistant's text."""
    refused = [{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot"}]},
               {"role": "user", "content": "why"}]
    answer = await client.post("/v1/chat/completions", json={"messages": refused, "max_tokens": 2})
    assert answer.status_code == 200, answer.text
    said = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "I cannot"},
            {"role": "user", "content": "why"}]
    same = await client.post("/v1/chat/completions", json={"messages": said, "max_tokens": 2})
    assert answer.json()["usage"]["prompt_tokens"] == same.json()["usage"]["prompt_tokens"]


async def test_top_p_zero_is_taken_as_openai_takes_it_the_top_token_only(client: httpx.AsyncClient) -> None:
    """OpenAI's top_p is in [0, 1]: 0 keeps the smallest nucleus, the one most likely token, whatever the seed."""
    greedy = (await chat(client, max_tokens=6, ignore_eos=True, **GREEDY)).json()["choices"][0]["message"]["content"]
    for seed in range(3):
        answer = await chat(client, max_tokens=6, ignore_eos=True, temperature=1.0, top_p=0, seed=seed)
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == greedy


async def test_models_lists_the_served_model(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/models")).json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["fake-model"]


async def test_the_served_model_is_retrieved_by_its_listed_name(client: httpx.AsyncClient) -> None:
    """GET /v1/models/{model}, the openai client's `models.retrieve`: the model as listed, or OpenAI's 404."""
    listed = (await client.get("/v1/models")).json()["data"][0]
    assert (await client.get("/v1/models/fake-model")).json() == listed
    assert (await client.get("/v1/models/")).json()["data"] == [listed]
    missing = await client.get("/v1/models/other")
    assert missing.status_code == 404
    error = missing.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "model_not_found")
    assert "`other`" in error["message"] and "fake-model" in error["message"]


@pytest.mark.parametrize(
    ("path", "body", "param", "fragment"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 0}, "n",
         "n must be between 1 and 16"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2},
            "top_logprobs",
            "top_logprobs needs logprobs",
        ),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 9}, "n",
         "counts as one request against this copy's concurrency of 8"),
        ("/v1/completions", {"prompt": "hi", "n": 2, "best_of": 1}, "best_of", "best_of must be between n (2)"),
        ("/v1/completions", {"prompt": "hi", "best_of": 2, "stream": True}, "best_of", "cannot be used with stream"),
        ("/v1/completions", {"prompt": "hi", "logprobs": 21}, "logprobs", "between 0 and 20"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema",
             "json_schema": {"name": "n", "schema": {"type": "integer", "minimum": "one"}}}},
            "response_format.json_schema.schema",
            "is not a valid JSON Schema",
        ),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages",
            "Only text content parts",
        ),
        ("/v1/chat/completions", {"messages": []}, "messages", "at least 1"),
        ("/v1/chat/completions", {"messages": [{"content": "hi"}]}, "messages.0.role", "Field required"),
        ("/v1/completions", {"prompt": ["a", "b"]}, "prompt", "one prompt per request"),
        ("/v1/completions", {"prompt": "hi", "temperature": -1}, "temperature", "temperature must be >= 0"),
        ("/v1/completions", {"prompt": "hi", "logit_bias": {"x": 1}}, "logit_bias", "token ids"),
        ("/v1/completions", {"prompt": "hi", "logit_bias": {"99999": 1}}, "logit_bias", "outside the vocabulary"),
        ("/v1/completions", {"prompt": [1, 99999]}, "prompt", "outside the vocabulary"),
        # echoing the ids reads them only after the check (llama.cpp has no text for an id outside its vocabulary)
        ("/v1/completions", {"prompt": [1, 99999], "echo": True}, "prompt", "outside the vocabulary"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, "max_tokens", "at least 1"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": "many"}, "max_tokens", "valid integer"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0},
         "max_completion_tokens", "max_completion_tokens must be at least 1; got 0"),
        # a value of none of a field's types names the field, not pydantic's name of the union's member (`stop.str`)
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stop": 5}, "stop",
         "`stop` is none of its accepted types (str: Input should be a valid string; list[str]: Input should be a "
         "valid list)"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stop": [5]}, "stop",
         "list[str], item 0: Input should be a valid string"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, "messages.0.content",
         "`messages.0.content` is none of its accepted types"),
        ("/v1/completions", {"prompt": "hi", "stop": 5, "n": "two"}, "n", "integer (and 1 more problem)."),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
         "messages[0].content[0].text", "messages[0].content[0] is a text part without its `text`"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}]},
         "messages", "got a 'refusal' part"),  # only an assistant's own words may be a refusal
        # OpenAI's deprecated form of tools: refused with the fix, never ignored (the model would be told no tools)
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                  "functions": [{"name": "f", "parameters": {"type": "object"}}]}, "functions",
         "send them as `tools`"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "function_call": "auto"},
         "function_call", "`tool_choice`"),
    ],
)
async def test_bad_requests_are_400_in_openai_shape(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], param: str, fragment: str
) -> None:
    response = await client.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert fragment in error["message"]


async def test_malformed_json_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/chat/completions", content=b'{"messages": [', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


async def test_context_length_exceeded() -> None:
    async with app_client(settings=ServerSettings(max_total_tokens=64)) as client:
        response = await client.post("/v1/completions", json={"prompt": list(range(5, 45)), "max_tokens": 30})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert "maximum context length is 64 tokens" in error["message"] and "70 tokens" in error["message"]


async def test_unknown_fields_are_ignored(client: httpx.AsyncClient) -> None:
    response = await chat(client, max_tokens=1, user="me", metadata={"a": 1}, parallel_tool_calls=False)
    assert response.status_code == 200
