"""Bodies a copy cannot use are the client's error, in the route's own shape, never a 500: JSON nested deeper than
any parser goes, chat_template_kwargs that would replace the renderer's own arguments; a 405 says what is allowed."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pier.server.byoc import codecs
from pier.server.byoc.errors import HandlerError

pytestmark = pytest.mark.anyio

DEEP_ARRAY = b"[" * 100_000
DEEP_FIELD = b'{"messages": [{"role": "user", "content": "hi"}], "x": ' + b"[" * 5_000 + b"]" * 5_000 + b"}"
HELLO = [{"role": "user", "content": "hi"}]


def shape(response: httpx.Response) -> str:
    body = response.json()
    if isinstance(body.get("error"), dict):
        assert set(body["error"]) == {"message", "type", "param", "code"}
        return "openai"
    assert set(body) == {"error", "error_type"}
    return "tgi"


@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_FIELD], ids=["array", "field"])
@pytest.mark.parametrize(("path", "expected"), [
    ("/invocations", "tgi"), ("/generate", "tgi"), ("/generate_stream", "tgi"),
    ("/v1/chat/completions", "openai"), ("/v1/completions", "openai"),
])
async def test_deeply_nested_json_is_a_400(client: httpx.AsyncClient, path: str, expected: str, body: bytes) -> None:
    response = await client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert shape(response) == expected
    assert "nests JSON arrays or objects too deeply" in response.text


def test_the_handlers_default_input_fn_refuses_deep_json_with_a_400() -> None:
    with pytest.raises(HandlerError) as caught:
        codecs.decode(DEEP_ARRAY.decode(), "application/json")
    assert caught.value.status == 400 and "too deeply" in caught.value.message


async def test_a_405_carries_allow(client: httpx.AsyncClient) -> None:
    for method, path, allowed in (("GET", "/generate", "POST"), ("POST", "/ping", "GET"),
                                  ("DELETE", "/v1/chat/completions", "POST")):
        response = await client.request(method, path)
        assert response.status_code == 405 and response.headers["allow"] == allowed, (method, path)


@pytest.mark.parametrize("kwargs", [
    {"add_generation_prompt": False}, {"messages": []}, {"tools": []}, {"bos_token": "<s>"},
    {"raise_exception": "no"}, {"enable_thinking": False, "documents": []},
])
async def test_chat_template_kwargs_cannot_replace_the_renderers_own(client: httpx.AsyncClient,
                                                                    kwargs: dict[str, Any]) -> None:
    payload = {"messages": HELLO, "max_tokens": 2, "chat_template_kwargs": kwargs}
    openai = await client.post("/v1/chat/completions", json=payload)
    assert openai.status_code == 400 and openai.json()["error"]["param"] == "chat_template_kwargs"
    clashing = next(name for name in kwargs if name != "enable_thinking")
    assert f"chat_template_kwargs cannot set {clashing}" in openai.json()["error"]["message"]
    tgi = await client.post("/invocations", json=payload)  # TGI's Messages API: TGI's validation status and shape
    assert tgi.status_code == 422 and shape(tgi) == "tgi" and "chat_template_kwargs cannot set" in tgi.text


async def test_the_templates_own_kwargs_still_pass(client: httpx.AsyncClient) -> None:
    payload = {"messages": HELLO, "max_tokens": 2, "chat_template_kwargs": {"enable_thinking": False}}
    assert (await client.post("/v1/chat/completions", json=payload)).status_code == 200
