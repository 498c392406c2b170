"""SageMaker's /ping and /invocations: payloads told apart by shape, answered in the matching shape."""

from __future__ import annotations

import json

import httpx
import pytest

from pier.engine.fake import FakeRunner
from pier.server.app import create_app
from pier.server.settings import ServerSettings
from tests.server.conftest import app_client, sse_data

pytestmark = pytest.mark.anyio

QUICK, BROWN, FOX = 262, 263, 264


def scripted() -> FakeRunner:
    return FakeRunner(n_ctx=256, script={2: QUICK, 3: BROWN, 4: FOX})


async def test_ping_is_200_when_loaded(client: httpx.AsyncClient) -> None:
    response = await client.get("/ping")
    assert response.status_code == 200 and response.json() == {"status": "ready"}


async def test_ping_is_503_while_loading_and_generation_too() -> None:
    app = create_app(ServerSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://pier") as client:
        ping = await client.get("/ping")
        chat = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        tgi = await client.post("/invocations", json={"inputs": "hi"})
    assert ping.status_code == 503 and ping.json()["status"] == "loading"
    assert chat.status_code == 503 and "still loading" in chat.json()["error"]["message"]
    assert chat.headers["retry-after"] == "1"
    assert tgi.status_code == 503 and tgi.json()["error_type"] == "unavailable"


async def test_tgi_payload_answers_a_list_with_the_full_text() -> None:
    async with app_client(scripted()) as client:
        response = await client.post("/invocations", json={"inputs": "the", "parameters": {"max_new_tokens": 2}})
        plain = await client.post(
            "/invocations", json={"inputs": "the", "parameters": {"max_new_tokens": 2, "return_full_text": False}}
        )
    assert response.status_code == 200
    assert response.json() == [{"generated_text": "the quick brown"}]
    assert plain.json() == [{"generated_text": " quick brown"}]


async def test_tgi_payload_streams_tgi_events() -> None:
    async with app_client(scripted()) as client:
        response = await client.post(
            "/invocations",
            json={"inputs": "the", "parameters": {"max_new_tokens": 3, "return_full_text": False}, "stream": True},
        )
    events = [json.loads(d) for d in sse_data(response.text)]
    assert [e["token"]["id"] for e in events] == [QUICK, BROWN, FOX]
    assert events[-1]["generated_text"] == " quick brown fox"


async def test_messages_payload_answers_a_tgi_chat_completion(client: httpx.AsyncClient) -> None:
    """TGI 2.0's ChatCompletion (the Messages API of the seeds' container); tests/server/flavors/test_tgi_messages.py
    checks every field against TGI's schema."""
    response = await client.post(
        "/invocations", json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3}
    )
    body = response.json()
    assert response.status_code == 200 and body["object"] == "text_completion"
    assert body["usage"]["completion_tokens"] == 3 and body["choices"][0]["finish_reason"] == "length"


async def test_messages_payload_streams_tgi_chunks(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/invocations", json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3, "stream": True}
    )
    data = sse_data(response.text)
    assert len(data) == 3 and "[DONE]" not in data  # one chunk per token; TGI 2.0 sends no [DONE]
    assert all(json.loads(d)["choices"][0]["delta"]["role"] == "assistant" for d in data)


async def test_prompt_payload_answers_a_text_completion(client: httpx.AsyncClient) -> None:
    response = await client.post("/invocations", json={"prompt": [5, 6, 7], "max_tokens": 2})
    body = response.json()
    assert body["object"] == "text_completion" and body["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "total_tokens": 5,
    }


async def test_json_is_read_whatever_the_content_type(client: httpx.AsyncClient) -> None:
    payload = json.dumps({"inputs": "hello", "parameters": {"max_new_tokens": 1}})
    response = await client.post("/invocations", content=payload, headers={"content-type": "text/plain"})
    assert response.status_code == 200 and len(response.json()) == 1


async def test_errors_take_the_detected_shape(client: httpx.AsyncClient) -> None:
    chat = await client.post("/invocations", json={"messages": [{"role": "user", "content": "hi"}], "n": 3})
    tgi = await client.post("/invocations", json={"inputs": "hi", "parameters": {"max_new_tokens": -1}})
    assert chat.status_code == 422 and chat.json()["error_type"] == "validation"  # TGI's, as its Messages API
    assert "n must be 1" in chat.json()["error"]
    assert tgi.status_code == 422 and "`max_new_tokens` must be strictly positive" in tgi.json()["error"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b'{"nothing": 1}', "Unrecognized /invocations payload"),
        (b"[1, 2]", "must be a JSON object"),
        (b"{not json", "not valid JSON"),
        (b'{"inputs": 7}', "`inputs`: Input should be a valid string"),
    ],
)
async def test_unusable_payloads_are_422(client: httpx.AsyncClient, content: bytes, fragment: str) -> None:
    response = await client.post("/invocations", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert fragment in response.json()["error"]


async def test_execution_parameters(client: httpx.AsyncClient) -> None:
    body = (await client.get("/execution-parameters")).json()
    assert body == {"MaxConcurrentTransforms": 128, "BatchStrategy": "SINGLE_RECORD", "MaxPayloadInMB": 6}
