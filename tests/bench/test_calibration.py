"""Choosing prompt tokens: words are kept only when the server counts each as one token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from pier.bench.calibration import POOL_WORDS, choose_tokens, verified_words
from pier.bench.options import BenchError, BenchOptions
from pier.bench.record import RequestRecord
from pier.bench.workload import Prompt


class CountingServer:
    """Counts prompt tokens like a tokenizer in which the `split` words are two tokens, plus a BOS."""

    accepts_token_ids = True

    def __init__(self, split: set[str], reports_usage: bool = True, overhead: int = 1) -> None:
        self.split = split
        self.reports_usage = reports_usage
        self.overhead = overhead
        self.probes = 0

    async def send(self, prompt: Prompt, record: RequestRecord) -> RequestRecord:
        self.probes += 1
        assert isinstance(prompt.user, str) and prompt.max_tokens == 1
        words = prompt.user.split()
        if self.reports_usage:
            record.input_tokens = self.overhead + sum(2 if w in self.split else 1 for w in words)
            record.input_tokens_source = "usage"
        return record


def calibrate(server: CountingServer, candidates: list[str]) -> tuple[tuple[str, ...], int | None, bool]:
    tokens = asyncio.run(verified_words(server, candidates))  # type: ignore[arg-type]
    return tokens.pool.words, tokens.overhead, tokens.verified


def test_multi_token_words_are_found_and_dropped() -> None:
    candidates = [f"w{i}" for i in range(100)]
    server = CountingServer(split={"w3", "w64", "w65"}, overhead=20)
    words, overhead, verified = calibrate(server, candidates)
    assert set(words) == set(candidates) - {"w3", "w64", "w65"}
    assert (overhead, verified) == (20, True)
    assert server.probes < len(candidates) // 3  # halving, not one probe per word


def test_stops_once_the_pool_is_full() -> None:
    server = CountingServer(split=set())
    words, _, _ = calibrate(server, [f"w{i}" for i in range(10 * POOL_WORDS)])
    assert len(words) == POOL_WORDS
    assert server.probes <= 1 + POOL_WORDS // 64


def test_a_server_without_usage_leaves_words_unverified() -> None:
    words, overhead, verified = calibrate(CountingServer(split=set(), reports_usage=False), ["a", "b"])
    assert (words, overhead, verified) == (("a", "b"), None, False)


def choose(options: BenchOptions, tokenize: httpx.Response | None, ids: bool = True) -> object:
    def handler(request: httpx.Request) -> httpx.Response:
        return tokenize if tokenize is not None else httpx.Response(404)

    async def go() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            server = CountingServer(set())
            return await choose_tokens(options, server, http, "http://h", ids_allowed=ids)  # type: ignore[arg-type]

    return asyncio.run(go())


def test_ids_from_the_servers_tokenizer_when_it_has_one() -> None:
    tokens = choose(BenchOptions(target="http://h"), httpx.Response(200, json={"tokens": [5, 6, 5, 7]}))
    assert tokens.pool.kind == "ids" and tokens.pool.ids == (5, 6, 7)  # type: ignore[attr-defined]


def test_words_when_the_server_has_no_tokenizer() -> None:
    tokens = choose(BenchOptions(target="http://h"), None)
    assert tokens.pool.kind == "words" and tokens.verified  # type: ignore[attr-defined]


def test_words_when_a_target_takes_no_ids() -> None:
    tokens = choose(BenchOptions(target="http://h"), httpx.Response(200, json={"tokens": [5]}), ids=False)
    assert tokens.pool.kind == "words"  # type: ignore[attr-defined]


def test_ids_asked_for_where_an_api_takes_none_says_how_to_fix() -> None:
    with pytest.raises(BenchError, match="--prompt-format text"):
        choose(BenchOptions(target="http://h", prompt_format="ids"), None, ids=False)  # type: ignore[arg-type]


def test_ids_asked_for_without_a_vocabulary_says_how_to_fix() -> None:
    with pytest.raises(BenchError, match="--vocab"):
        choose(BenchOptions(target="http://h", prompt_format="ids"), None)  # type: ignore[arg-type]


def test_ids_from_a_gguf_are_its_normal_tokens(tiny_gguf: Path) -> None:
    from gguf import GGUFReader, TokenType

    tokens = choose(BenchOptions(target="http://h", vocab=tiny_gguf), None)
    types = GGUFReader(tiny_gguf).fields["tokenizer.ggml.token_type"]
    normal = [i for i, part in enumerate(types.data) if int(types.parts[part][0]) == TokenType.NORMAL]
    assert tokens.pool.ids == tuple(normal)  # type: ignore[attr-defined]
