"""The copy's report of what its prefix cache holds (X-Pier-Kv-Held), in the gateway's text blocks."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import pytest
from fastapi import FastAPI

from pier.channel.headers import KV_HELD
from pier.channel.kv_held import WANTED, decode_held
from pier.channel.prefix import request_prefix
from pier.engine.engine import Engine
from pier.server.kv_report import KvReport, held_blocks


@pytest.mark.parametrize(
    ("blocks", "tokens", "held", "expected"),
    [
        (("a", "b", "c", "d"), 100, 100, ("a", "b", "c", "d")),  # all of it
        (("a", "b", "c", "d"), 100, 150, ("a", "b", "c", "d")),  # and what it generated after
        (("a", "b", "c", "d"), 100, 50, ("a", "b")),  # half of its tokens: half of its blocks
        (("a", "b", "c", "d"), 100, 49, ("a",)),  # rounded down: a block is claimed only when covered
        (("a", "b", "c", "d"), 100, 0, ()),  # evicted
        ((), 100, 100, ()),  # shorter than a block
        (("a",), 0, 0, ()),
    ],
)
def test_held_blocks_are_the_held_share_of_the_prompt(
    blocks: tuple[str, ...], tokens: int, held: int, expected: tuple[str, ...]
) -> None:
    assert held_blocks(blocks, tokens, held) == expected


def _holds(cache: dict[tuple[int, ...], int]) -> KvReport:
    return KvReport(lambda tokens, adapter: cache.get(tuple(tokens), 0), prompts=3, limit=5)


@pytest.mark.parametrize(
    ("recorded", "cache", "expected"),
    [
        ([], {}, ()),
        ([(("a", "b"), (1, 2))], {(1, 2): 2}, ("a", "b")),
        ([(("a", "b"), (1, 2))], {}, ()),  # evicted: it drops out of the report
        # most recent prompt first, each prompt's shortest prefix first
        ([(("a",), (1,)), (("x", "y"), (7, 8))], {(1,): 1, (7, 8): 2}, ("x", "y", "a")),
        # a prompt sent again moves to the front instead of counting twice
        ([(("a",), (1,)), (("x",), (7,)), (("a",), (1,))], {(1,): 1, (7,): 1}, ("a", "x")),
        # only the `prompts` most recent are remembered
        ([(("a",), (1,)), (("b",), (2,)), (("c",), (3,)), (("d",), (4,))], {(1,): 1, (2,): 1, (3,): 1, (4,): 1},
         ("d", "c", "b")),
        # the report stops at `limit` blocks
        ([(("a", "b", "c"), (1,)), (("x", "y", "z"), (2,))], {(1,): 1, (2,): 1}, ("x", "y", "z", "a", "b", "c")),
    ],
)
def test_the_report_lists_the_held_blocks_of_recent_prompts(
    recorded: list[tuple[tuple[str, ...], tuple[int, ...]]], cache: dict[tuple[int, ...], int],
    expected: tuple[str, ...],
) -> None:
    report = _holds(cache)
    for blocks, tokens in recorded:
        report.record(blocks, tokens)
    assert report.held() == expected
    assert report.header() == ",".join(expected[:5])


def _body(text: str) -> bytes:
    return httpx.Request("POST", "http://x", json={"inputs": text, "parameters": {"max_new_tokens": 2}}).content


async def _held(client: httpx.AsyncClient, body: bytes, headers: dict[str, str] | None = None) -> Sequence[str]:
    response = await client.post("/invocations", content=body,
                                 headers={"content-type": "application/json", **WANTED, **(headers or {})})
    assert response.status_code == 200, response.text
    return decode_held(response.headers.get(KV_HELD)) or ()


@pytest.mark.anyio
async def test_a_copy_reports_only_when_asked(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Building the report checks every recent prompt against the cache: only KV_AWARE routing asks for it."""
    body = _body("A" * 300)
    await _held(client, body)
    response = await client.post("/invocations", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200 and KV_HELD not in response.headers


@pytest.mark.anyio
async def test_an_answer_reports_the_prompts_the_cache_still_holds(
    app: FastAPI, engine: Engine, client: httpx.AsyncClient
) -> None:
    first = _body("A" * 300)
    assert len(request_prefix(first)) == 2  # the gateway's blocks of the same body
    assert set(request_prefix(first)) <= set(await _held(client, first))
    engine.core.prefix.clear()  # evicted (the engine is idle between requests)
    held = await _held(client, _body("C" * 300))
    assert not set(request_prefix(first)) & set(held)
    assert set(request_prefix(_body("C" * 300))) <= set(held)


@pytest.mark.anyio
async def test_a_framed_answer_carries_the_report_on_the_outer_response(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    body = _body("A" * 300)
    await _held(client, body)
    held = await _held(client, _body("D" * 300), {"X-Pier-Resumable": "1"})  # reported as the answer starts
    assert set(request_prefix(body)) <= set(held)
