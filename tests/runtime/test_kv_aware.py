"""KV_AWARE routing on what each copy says its prefix cache holds (pier.channel.kv_held), not the chooser's memory."""

from __future__ import annotations

import pytest

from pier.runtime.copy_choice import Candidate, CopyChooser, choose
from pier.runtime.routing_strategy import RequestRouting, Routing, Strategy, request_routing
from tests.runtime.test_copy_choice import copy

KV = RequestRouting(Routing(Strategy.KV_AWARE))
DEFAULT = RequestRouting()
LOR = RequestRouting(Routing(Strategy.LEAST_OUTSTANDING_REQUESTS))


def held(copy_id: str, outstanding: int = 0, cached: tuple[str, ...] = (),
         says: tuple[str, ...] | None = None) -> Candidate:
    return Candidate(copy(copy_id), outstanding, 0, frozenset(cached), None, (),
                     None if says is None else frozenset(says))


CASES = [
    # (name, candidates, prefix, route, expected)
    ("said holds beats remembered", [held("a", cached=("p1",), says=()), held("b", 1, says=("p1",))], ("p1",), KV, "b"),
    ("unsaid: remembered counts", [held("a", 1, cached=("p1",)), held("b", 0)], ("p1",), KV, "a"),
    # Held nowhere: back where it was sent (its kept part serves, its copy learns to keep more), within slack.
    ("held nowhere: remembered", [held("a", 1, cached=("p1",), says=()), held("b", 0, says=())], ("p1",), KV, "a"),
    ("held nowhere, nor sent: least busy", [held("a", 1, says=()), held("b", 0, says=())], ("p1",), KV, "b"),
    ("longest said match", [held("a", says=("p1",)), held("b", 2, says=("p1", "p2"))], ("p1", "p2"), KV, "b"),
    ("said match past slack", [held("a", 0), held("b", 5, says=("p1",))], ("p1",), KV, "a"),
    # Only KV_AWARE reads what copies say; the default keeps the chooser's own memory.
    ("default: remembered", [held("a", 1, cached=("p1",), says=()), held("b", 0, says=("p1",))], ("p1",), DEFAULT,
     "a"),
    ("least outstanding: load only", [held("a", 1, says=("p1",)), held("b", 0)], ("p1",), LOR, "b"),
]


@pytest.mark.parametrize(("candidates", "prefix", "route", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_choose_kv_aware(candidates: list[Candidate], prefix: tuple[str, ...], route: RequestRouting,
                         expected: str) -> None:
    chosen = choose(candidates, prefix, route=route)
    assert chosen is not None and chosen.copy_id == expected


def test_a_restarted_gateway_follows_the_copy_that_says_it_holds_the_conversation() -> None:
    copies = [copy("a"), copy("b"), copy("c")]
    chooser = CopyChooser()  # a fresh gateway: it remembers nothing it sent
    chooser.sync(copies)
    chooser.holds_prefixes("c", ("p1", "p2"))
    lease = chooser.pick(copies, ("p1", "p2", "p3"), route=KV)
    assert lease is not None and lease.copy.copy_id == "c"


def test_a_copy_that_evicted_a_prefix_stops_drawing_it_from_one_that_holds_it() -> None:
    copies = [copy("a"), copy("b")]
    chooser = CopyChooser()
    first = chooser.pick(copies, ("p1",), route=KV)
    assert first is not None
    first.release()
    holder = first.copy.copy_id
    other_id = next(c.copy_id for c in copies if c.copy_id != holder)
    chooser.holds_prefixes(holder, ())  # evicted there; the other copy computed it meanwhile
    chooser.holds_prefixes(other_id, ("p1",))
    other = chooser.pick(copies, ("p1",), route=KV)
    assert other is not None and other.copy.copy_id == other_id


def test_no_header_keeps_what_was_said_and_a_new_process_forgets_it() -> None:
    chooser = CopyChooser()
    chooser.sync([copy("a"), copy("b")])
    chooser.holds_prefixes("b", ("p1",))
    chooser.holds_prefixes("b", None)
    lease = chooser.pick([copy("a"), copy("b")], ("p1",), route=KV)
    assert lease is not None and lease.copy.copy_id == "b"
    lease.release()
    restarted = [copy("a"), copy("b", pid=2)]
    chooser.holds_prefixes("a", ())
    lease = chooser.pick(restarted, ("p9",), route=KV)  # b's new process said nothing: its say is gone
    assert lease is not None
    assert chooser._loads["b"].held is None


def test_route_of_kv_aware_has_no_prefix_aware_key() -> None:
    assert request_routing(Routing(Strategy.KV_AWARE), b"hello").key is None


def test_what_was_sent_after_the_copys_last_report_counts_until_the_next() -> None:
    copies = [copy("a"), copy("b")]
    chooser = CopyChooser()
    chooser.sync(copies)
    chooser.holds_prefixes("a", ())
    chooser.holds_prefixes("b", ())
    first = chooser.pick(copies, ("p1",), route=KV)  # its answer reports as it starts: without p1
    assert first is not None
    first.release()
    again = chooser.pick(copies, ("p1", "p2"), route=KV)
    assert again is not None and again.copy.copy_id == first.copy.copy_id
    again.release()
    chooser.holds_prefixes(first.copy.copy_id, ())  # then it said p1 is gone
    assert chooser._loads[first.copy.copy_id].held == frozenset()
