"""llama-server's /tokenize, /detokenize and /apply-template on a copy, over a real engine on the fake runner."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from pier.server.flavors.tokenizer import piece

pytestmark = pytest.mark.anyio

HELLO, WORLD = 259, 260  # FakeRunner's " hello", " world"
BOS = 1


async def test_tokenize_ids_and_pieces(client: httpx.AsyncClient) -> None:
    plain = (await client.post("/tokenize", json={"content": "hello world"})).json()
    assert plain == {"tokens": [HELLO, WORLD]}  # add_special defaults to false, as llama-server's
    special = (await client.post("/tokenize", json={"content": "hello world", "add_special": True})).json()
    assert special == {"tokens": [BOS, HELLO, WORLD]}
    pieces = (await client.post("/tokenize", json={"content": "hello world", "with_pieces": True})).json()
    assert pieces == {"tokens": [{"id": HELLO, "piece": " hello"}, {"id": WORLD, "piece": " world"}]}


async def test_tokenize_mixed_content_keeps_ids(client: httpx.AsyncClient) -> None:
    mixed = (await client.post("/tokenize", json={"content": ["hello", WORLD, "world"]})).json()
    assert mixed == {"tokens": [HELLO, WORLD, WORLD]}


async def test_detokenize_round_trips(client: httpx.AsyncClient) -> None:
    tokens = (await client.post("/tokenize", json={"content": "hello world"})).json()["tokens"]
    assert (await client.post("/detokenize", json={"tokens": tokens})).json() == {"content": " hello world"}
    assert (await client.post("/detokenize", json={"tokens": []})).json() == {"content": ""}


async def test_apply_template_is_the_chat_prompt(client: httpx.AsyncClient) -> None:
    messages = [{"role": "user", "content": "hello world"}]
    answer = (await client.post("/apply-template", json={"messages": messages})).json()
    assert answer == {"prompt": "<user>hello world<assistant>"}  # the fake model's template (see test_openai.py)


@pytest.mark.parametrize(("path", "body", "param"), [
    ("/tokenize", {}, "content"),
    ("/tokenize", {"content": 5}, "content"),
    ("/tokenize", {"content": ["hello", 10**9]}, "content"),
    ("/detokenize", {"tokens": [-1]}, "tokens"),
    ("/detokenize", {"tokens": [10**9]}, "tokens"),
    ("/detokenize", {"tokens": "hello"}, "tokens"),
    ("/apply-template", {"messages": []}, "messages"),
    ("/apply-template", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
])
async def test_bad_input_is_an_openai_shaped_400(client: httpx.AsyncClient, path: str, body: dict[str, Any],
                                                 param: str) -> None:
    response = await client.post(path, json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert (error["param"] or "").startswith(param)


@pytest.mark.parametrize(("raw", "expected"), [
    (b" hello", " hello"), ("é".encode(), "é"), ("é".encode()[:1], [0xC3]), (b"", ""),
])
def test_piece_is_text_or_its_bytes(raw: bytes, expected: str | list[int]) -> None:
    assert piece(raw) == expected
