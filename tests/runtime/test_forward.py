"""Routing between real copies through the gateway: turns, prefix affinity, load spreading."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.runtime.servers import CopyServer, Gateway, SlowRunner, copy_server, gateway
from tests.runtime.servers import runtime_client as client

SYSTEM = "hello world the quick brown fox jumps over the lazy dog " * 6  # 330 characters: two blocks


@pytest.fixture
def two() -> Iterator[tuple[Gateway, CopyServer, CopyServer]]:
    with copy_server(SlowRunner(0.01)) as a, copy_server(SlowRunner(0.01)) as b, gateway() as gw:
        gw.route("llm", [a.status("a"), b.status("b")])
        yield gw, a, b


def prompts(copy: CopyServer) -> int:
    return copy.engine.stats().prompt_tokens


def invoke(gw: Gateway, payload: dict[str, object]) -> None:
    client(gw.url).invoke_endpoint(EndpointName="llm", Body=json.dumps(payload), ContentType="application/json")


def test_requests_one_at_a_time_take_turns(two: tuple[Gateway, CopyServer, CopyServer]) -> None:
    gw, a, b = two
    for i in range(4):
        invoke(gw, {"inputs": f"question {i}", "parameters": {"max_new_tokens": 2}})
        assert (prompts(a) > 0, prompts(b) > 0) == (True, i > 0)
    assert prompts(a) == pytest.approx(prompts(b), rel=0.2)


def test_a_shared_prefix_sticks_to_the_copy_that_has_it(two: tuple[Gateway, CopyServer, CopyServer]) -> None:
    gw, a, b = two
    for question in ["one", "two", "three", "four"]:
        invoke(gw, {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
                    "max_tokens": 2})
    assert sorted([prompts(a) > 0, prompts(b) > 0]) == [False, True]
    served = a if prompts(a) else b
    assert served.engine.stats().cached_prompt_tokens > 0  # what affinity is for


def test_concurrent_requests_spread_over_both_copies(two: tuple[Gateway, CopyServer, CopyServer]) -> None:
    gw, a, b = two
    payload = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}],
               "max_tokens": 30}
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda _: invoke(gw, payload), range(12)))
    # One prefix, but past the slack the second copy takes the overflow.
    assert prompts(a) > 0 and prompts(b) > 0
