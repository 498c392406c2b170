"""Routing strategies: the pure decision for each of AWS's RoutingStrategy values (pier.runtime.routing_strategy)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from pier.backends.base import CopyState
from pier.runtime.copy_choice import Candidate, CopyChooser, choose
from pier.runtime.routing_strategy import (
    RequestRouting,
    Routing,
    Strategy,
    prefix_key,
    rendezvous_order,
    request_routing,
)
from tests.runtime.test_copy_choice import cand, copy

LOR = Routing(Strategy.LEAST_OUTSTANDING_REQUESTS)
RANDOM = Routing(Strategy.RANDOM)
KV = Routing(Strategy.KV_AWARE)


def prefix_aware(threshold: int, length: int = 1024) -> Routing:
    return Routing(Strategy.PREFIX_AWARE, length, threshold)


KEY = "k"
HOME, SECOND, THIRD = rendezvous_order(KEY, ["a", "b", "c"])  # KEY's own order of the three copies

STRATEGY_CASES = [
    # (name, candidates, prefix blocks, route, expected)
    # LEAST_OUTSTANDING_REQUESTS: load only, a prefix the busier copy served does not count.
    ("lor: least busy", [cand("a", 2), cand("b", 1)], (), RequestRouting(LOR), "b"),
    ("lor: ignores affinity", [cand("a", 0), cand("b", 1, cached=("p1",))], ("p1",), RequestRouting(LOR), "a"),
    ("lor: never at its concurrency", [cand("a", 1, concurrency=1), cand("b", 3)], (), RequestRouting(LOR), "b"),
    # KV_AWARE and no strategy: pier's prefix affinity within the slack.
    ("kv: affinity", [cand("a", 0), cand("b", 1, cached=("p1",))], ("p1",), RequestRouting(KV), "b"),
    ("default: affinity", [cand("a", 0), cand("b", 1, cached=("p1",))], ("p1",), RequestRouting(), "b"),
    # PREFIX_AWARE: the key's home copy until it reaches the threshold, then the next in the key's order.
    ("prefix: home", [cand("a"), cand("b"), cand("c")], (), RequestRouting(prefix_aware(2), KEY), HOME),
    ("prefix: home though busier", [cand(HOME, 1), cand(SECOND, 0), cand(THIRD, 0)], (),
     RequestRouting(prefix_aware(2), KEY), HOME),
    ("prefix: home at threshold", [cand(HOME, 2), cand(SECOND, 1), cand(THIRD, 0)], (),
     RequestRouting(prefix_aware(2), KEY), SECOND),
    ("prefix: home and second at threshold", [cand(HOME, 2), cand(SECOND, 2), cand(THIRD, 1)], (),
     RequestRouting(prefix_aware(2), KEY), THIRD),
    ("prefix: all at threshold: least busy", [cand(HOME, 3), cand(SECOND, 5), cand(THIRD, 4)], (),
     RequestRouting(prefix_aware(2), KEY), HOME),
    ("prefix: home full (its concurrency)", [cand(HOME, 1, concurrency=1), cand(SECOND, 0), cand(THIRD, 0)], (),
     RequestRouting(prefix_aware(8), KEY), SECOND),
    ("prefix: home not ready", [cand(HOME, state=CopyState.STARTING), cand(SECOND, 0), cand(THIRD, 0)], (),
     RequestRouting(prefix_aware(8), KEY), SECOND),
    ("prefix: no key: default", [cand("a", 0), cand("b", 1, cached=("p1",))], ("p1",),
     RequestRouting(prefix_aware(2)), "b"),
    # A session's request goes to its copy, whatever the strategy, or nowhere yet.
    ("pin", [cand("a", 0), cand("b", 3)], (), RequestRouting(LOR, pin="b"), "b"),
    ("pin full", [cand("a", 0), cand("b", 1, concurrency=1)], (), RequestRouting(LOR, pin="b"), None),
    ("pin gone", [cand("a", 0)], (), RequestRouting(pin="b"), None),
]


@pytest.mark.parametrize(("candidates", "prefix", "route", "expected"),
                         [case[1:] for case in STRATEGY_CASES], ids=[case[0] for case in STRATEGY_CASES])
def test_choose_by_strategy(candidates: list[Candidate], prefix: tuple[str, ...], route: RequestRouting,
                            expected: str | None) -> None:
    chosen = choose(candidates, prefix, route=route)
    assert (chosen.copy_id if chosen else None) == expected


@pytest.mark.parametrize(("index", "expected"), [(0, "a"), (1, "b"), (2, "c")])
def test_random_draws_among_copies_with_room(index: int, expected: str) -> None:
    drawn: list[int] = []

    def draw(n: int) -> int:
        drawn.append(n)
        return index

    candidates = [cand("c", 5), cand("a", 0), cand("b", 9), cand("d", 1, concurrency=1)]  # d is full
    chosen = choose(candidates, route=RequestRouting(RANDOM), draw=draw)
    assert chosen is not None and chosen.copy_id == expected and drawn == [3]


def test_random_spreads_evenly_whatever_the_load() -> None:
    chooser = CopyChooser(default_concurrency=1000)
    copies = [copy("a"), copy("b")]
    leases = [chooser.pick(copies, route=RequestRouting(RANDOM)) for _ in range(400)]
    counts = Counter(lease.copy.copy_id for lease in leases if lease is not None)
    assert 120 < counts["a"] < 280 and counts["a"] + counts["b"] == 400
    runs = sum(1 for x, y in itertools.pairwise(leases) if x and y and x.copy == y.copy)
    assert runs > 100  # least outstanding would alternate a, b, a, b: no two in a row


def test_rendezvous_order_moves_only_the_keys_of_a_copy_that_leaves() -> None:
    keys = [prefix_key(f"prompt {i}") for i in range(200)]
    before = {k: rendezvous_order(k, ["a", "b", "c"])[0] for k in keys}
    after = {k: rendezvous_order(k, ["a", "b"])[0] for k in keys}
    assert {k for k in keys if before[k] != after[k]} == {k for k in keys if before[k] == "c"}
    assert set(Counter(before.values())) == {"a", "b", "c"}


@pytest.mark.parametrize(("routing", "prefix", "same_as", "expected_same"), [
    (prefix_aware(2, 1024), b"x" * 1024 + b"tail one", b"x" * 1024 + b"tail two", True),  # only the first 1024 bytes
    (prefix_aware(2, 1024), b"x" * 1023 + b"1", b"x" * 1023 + b"2", False),
    (prefix_aware(2, 2048), b"x" * 1024 + b"tail one", b"x" * 1024 + b"tail two", False),
])
def test_route_key_is_the_first_prefix_length_bytes(routing: Routing, prefix: bytes, same_as: bytes,
                                                    expected_same: bool) -> None:
    assert (request_routing(routing, prefix).key == request_routing(routing, same_as).key) is expected_same


def test_route_key_only_for_prefix_aware() -> None:
    assert request_routing(LOR, b"body").key is None
    assert request_routing(Routing(), b"body", pin="a") == RequestRouting(pin="a")


def test_a_prefix_aware_id_sets_apart_the_same_prefix() -> None:
    """InvokeEndpoint's PrefixAwareId: the same prefix with the same id routes alike, with another id apart (AWS:
    applications whose prompts share a prefix each set their own), and without one as before."""
    routing, body = prefix_aware(2, 8), b"x" * 8 + b"own"
    own = request_routing(routing, body, prefix_id="app-1").key
    assert own == request_routing(routing, b"x" * 8, prefix_id="app-1").key
    assert own != request_routing(routing, body, prefix_id="app-2").key
    assert own != request_routing(routing, body).key
    assert request_routing(routing, body).key == prefix_key(b"x" * 8)
    assert request_routing(LOR, body, prefix_id="app-1").key is None
