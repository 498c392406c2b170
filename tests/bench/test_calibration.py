"""Choosing prompt tokens: words are kept only when the server counts each as one token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from pier.bench.calibration import (
    POOL_WORDS,
    PROBE_REQUESTS,
    ProbeBudget,
    choose_tokens,
    verified_words,
)
from pier.bench.conversations import Prompt
from pier.bench.options import BenchError, BenchOptions
from pier.bench.request_record import RequestRecord


class CountingServer:
    """Counts prompt tokens like a tokenizer in which the `split` words are two tokens, plus a BOS."""

    accepts_token_ids = True

    def __init__(self, split: set[str], reports_usage: bool = True, overhead: int = 1) -> None:
        self.split = split
        self.reports_usage = reports_usage
        self.overhead = overhead
        self.probes = 0

    def headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer k", "Accept": "text/event-stream"}

    async def send(self, prompt: Prompt, record: RequestRecord) -> RequestRecord:
        self.probes += 1
        assert isinstance(prompt.user, str) and prompt.max_tokens == 1
        words = prompt.user.split()
        if self.reports_usage:
            record.input_tokens = self.overhead + sum(2 if w in self.split else 1 for w in words)
            record.input_tokens_source = "usage"
        return record


def calibrate(server: CountingServer, candidates: list[str]) -> tuple[tuple[str, ...], int | None, bool]:
    tokens = asyncio.run(verified_words(server, candidates, budget=ProbeBudget(seconds=3600)))  # type: ignore[arg-type]
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


def test_probing_stops_at_its_budget_and_says_so() -> None:
    """A vocabulary in which no candidate is one token: halving would cost ~2 probes per word."""
    candidates = [f"w{i}" for i in range(4000)]
    server = CountingServer(split=set(candidates))
    tokens = asyncio.run(verified_words(server, candidates))  # type: ignore[arg-type]
    assert server.probes == 1 + PROBE_REQUESTS
    assert not tokens.verified and tokens.overhead == 1
    assert "stopped at the probing budget" in tokens.pool.source and "approximate" in tokens.pool.source


def test_a_budget_in_seconds_stops_probing_too() -> None:
    server = CountingServer(split={f"w{i}" for i in range(1000)})
    budget = ProbeBudget(requests=10**6, seconds=0.0)
    tokens = asyncio.run(verified_words(server, [f"w{i}" for i in range(1000)], budget=budget))  # type: ignore[arg-type]
    assert server.probes == 1 and budget.exhausted and not tokens.verified


def test_the_servers_own_words_cost_one_checking_probe() -> None:
    server = CountingServer(split={"split"})

    async def told(want: int) -> list[str]:
        return ["x", "y", "z"]

    tokens = asyncio.run(verified_words(server, ["split", "x"], told))  # type: ignore[arg-type]
    assert tokens.pool.words == ("x", "y", "z") and tokens.verified and server.probes == 2
    assert "/tokenize" in tokens.pool.source


def test_words_the_server_names_wrongly_fall_back_to_probing() -> None:
    server = CountingServer(split={"split"})

    async def told(want: int) -> list[str]:
        return ["split", "x"]  # the usage says "split" is two tokens

    tokens = asyncio.run(verified_words(server, ["split", "x", "y"], told, ProbeBudget(seconds=3600)))  # type: ignore[arg-type]
    assert tokens.pool.words == ("x", "y") and tokens.verified and "probes" in tokens.pool.source


def pieces_answer(request: httpx.Request) -> httpx.Response:
    """llama-server's /tokenize with pieces, for a vocabulary that holds " the", " cat", " a" and " c" whole and
    spells every other word letter by letter after its space."""
    import json

    body = json.loads(request.content)
    assert body["with_pieces"] is True and body["add_special"] is False
    assert request.headers["authorization"] == "Bearer k"  # the client's key, not its stream's Accept
    assert request.headers.get("accept") != "text/event-stream"
    whole = {"the", "cat", "a", "c"}
    tokens = []
    for word in body["content"].split(" "):
        pieces = [" " + word] if word in whole else [" " + word[0], *word[1:]]
        tokens += [{"id": 0, "piece": p} for p in pieces]
    return httpx.Response(200, json={"tokens": tokens})


def test_words_from_the_servers_tokenizer() -> None:
    async def go() -> object:
        async with httpx.AsyncClient(transport=httpx.MockTransport(pieces_answer)) as http:
            return await choose_tokens(BenchOptions(target="http://h", prompt_format="text"),  # type: ignore[arg-type]
                                       CountingServer(set()), http, "http://h/tokenize",  # type: ignore[arg-type]
                                       ids_allowed=False)

    tokens = asyncio.run(go())
    # the candidates that are one token, then the pieces the others split into (" c" of " could", " o" of " of")
    words = tokens.pool.words  # type: ignore[attr-defined]
    assert words[:2] == ("the", "a") and {"c", "o"} <= set(words) and "of" not in words
    assert tokens.verified and "/tokenize" in tokens.pool.source  # type: ignore[attr-defined]
