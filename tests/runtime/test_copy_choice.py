from __future__ import annotations

import pytest

from pier.backends.base import CopyState, CopyStatus
from pier.runtime.copy_choice import Candidate, CopyChooser, choose, matched_blocks
from pier.runtime.routing_strategy import RequestRouting


def copy(copy_id: str, state: CopyState = CopyState.READY, pid: int | None = 1) -> CopyStatus:
    return CopyStatus(copy_id, "ic", state, url=f"http://127.0.0.1/{copy_id}", pid=pid)


def cand(copy_id: str, outstanding: int = 0, last: int = 0, cached: tuple[str, ...] = (),
         state: CopyState = CopyState.READY, concurrency: int | None = None) -> Candidate:
    return Candidate(copy(copy_id, state), outstanding, last, frozenset(cached), concurrency)


CHOOSE_CASES = [
    # (name, candidates, prefix, slack, expected)
    ("none", [], (), 4, None),
    ("none ready", [cand("a", state=CopyState.STARTING), cand("b", state=CopyState.RESTARTING)], (), 4, None),
    ("only ready", [cand("a", state=CopyState.STARTING), cand("b", 9)], (), 4, "b"),
    ("least outstanding", [cand("a", 3), cand("b", 1), cand("c", 2)], (), 4, "b"),
    ("tie: chosen longest ago", [cand("a", 1, last=7), cand("b", 1, last=3)], (), 4, "b"),
    ("tie: never chosen first", [cand("a", 0, last=1), cand("b", 0, last=0)], (), 4, "b"),
    ("tie: lowest id", [cand("b"), cand("a")], (), 4, "a"),
    ("affinity within slack", [cand("a", 0), cand("b", 4, cached=("p1",))], ("p1",), 4, "b"),
    ("affinity past slack", [cand("a", 0), cand("b", 5, cached=("p1",))], ("p1",), 4, "a"),
    ("no slack: affinity only at equal load", [cand("a", 0), cand("b", 1, cached=("p1",))], ("p1",), 0, "a"),
    ("longest match wins", [cand("a", 0, cached=("p1",)), cand("b", 2, cached=("p1", "p2"))], ("p1", "p2"), 4, "b"),
    ("equal match: least busy", [cand("a", 2, cached=("p1",)), cand("b", 1, cached=("p1",))], ("p1", "p2"), 4, "b"),
    ("match must be leading", [cand("a", 1), cand("b", 0, cached=("p2",))], ("p1", "p2"), 4, "b"),
    ("leading beats deeper-only", [cand("a", 1, cached=("p1",)), cand("b", 0, cached=("p2",))], ("p1", "p2"), 4, "a"),
    ("affine copy not ready", [cand("a", 3), cand("b", 0, cached=("p1",), state=CopyState.STARTING)], ("p1",), 4, "a"),
    ("no prefix: plain least busy", [cand("a", 1, cached=("p1",)), cand("b", 0)], (), 4, "b"),
    # A copy at its concurrency is never chosen, however affine or idle the others look.
    ("at its concurrency", [cand("a", 2, concurrency=2)], (), 4, None),
    ("all at their concurrency", [cand("a", 1, concurrency=1), cand("b", 3, concurrency=3)], (), 4, None),
    ("the one with room", [cand("a", 1, concurrency=1), cand("b", 5, concurrency=8)], (), 4, "b"),
    ("affine copy full", [cand("a", 0, concurrency=4), cand("b", 2, cached=("p1",), concurrency=2)], ("p1",), 4, "a"),
    ("affine copy with room", [cand("a", 0, concurrency=4), cand("b", 1, cached=("p1",), concurrency=2)], ("p1",), 4,
     "b"),
    ("least busy among those with room", [cand("a", 0, concurrency=0), cand("b", 2), cand("c", 1)], (), 4, "c"),
]


@pytest.mark.parametrize(("candidates", "prefix", "slack", "expected"),
                         [case[1:] for case in CHOOSE_CASES], ids=[case[0] for case in CHOOSE_CASES])
def test_choose(candidates: list[Candidate], prefix: tuple[str, ...], slack: int, expected: str | None) -> None:
    chosen = choose(candidates, prefix, slack=slack)
    assert (chosen.copy_id if chosen else None) == expected


def test_a_ready_copy_without_url_is_not_chosen() -> None:
    assert choose([Candidate(CopyStatus("a", "ic", CopyState.READY, url=None))]) is None


@pytest.mark.parametrize(
    ("cached", "prefix", "expected"),
    [((), (), 0), (("a",), (), 0), (("a", "b"), ("a", "b", "c"), 2), (("b", "c"), ("a", "b", "c"), 0),
     (("a", "c"), ("a", "b", "c"), 1)],
)
def test_matched_blocks(cached: tuple[str, ...], prefix: tuple[str, ...], expected: int) -> None:
    assert matched_blocks(set(cached), prefix) == expected


def test_router_spreads_concurrent_requests_and_counts_them() -> None:
    chooser, copies = CopyChooser(), [copy("a"), copy("b")]
    leases = [chooser.pick(copies) for _ in range(4)]
    assert [lease.copy.copy_id for lease in leases if lease] == ["a", "b", "a", "b"]
    assert chooser.outstanding("a") == chooser.outstanding("b") == 2
    for lease in leases:
        assert lease is not None
        lease.release()
        lease.release()  # harmless
    assert chooser.outstanding("a") == chooser.outstanding("b") == 0 and chooser.idle


def test_router_takes_turns_when_requests_come_one_at_a_time() -> None:
    chooser, copies = CopyChooser(), [copy("a"), copy("b"), copy("c")]
    order = []
    for _ in range(6):
        with chooser.pick(copies) as lease:  # type: ignore[union-attr]
            order.append(lease.copy.copy_id)
    assert order == ["a", "b", "c", "a", "b", "c"]


def test_router_follows_a_prefix_until_that_copy_is_much_busier() -> None:
    chooser, copies = CopyChooser(slack=2), [copy("a"), copy("b")]
    chooser.pick(copies, ("x",))  # to a, which then has 1 outstanding
    chosen = []
    for _ in range(5):
        lease = chooser.pick(copies, ("p", "q"))
        assert lease is not None
        chosen.append(lease.copy.copy_id)
    # b while it has at most 1 + 2 outstanding before the pick; then the prefix spills over to a.
    assert chosen == ["b", "b", "b", "b", "a"]
    assert chooser.outstanding("b") == 4 and chooser.outstanding("a") == 2


def test_router_excludes_copies_already_tried() -> None:
    chooser, copies = CopyChooser(), [copy("a"), copy("b")]
    lease = chooser.pick(copies, exclude={"a"})
    assert lease is not None and lease.copy.copy_id == "b"
    assert chooser.pick(copies, exclude={"a", "b"}) is None


def test_a_restarted_copy_forgets_its_prefixes() -> None:
    chooser = CopyChooser()
    with chooser.pick([copy("a", pid=1), copy("b", pid=2)], ("p",)) as first:  # type: ignore[union-attr]
        assert first.copy.copy_id == "a"
    with chooser.pick([copy("a", pid=1), copy("b", pid=2)], ("p",)) as again:  # type: ignore[union-attr]
        assert again.copy.copy_id == "a"
    with chooser.pick([copy("a", pid=9), copy("b", pid=2)], ("p",)) as after:  # type: ignore[union-attr]
        assert after.copy.copy_id == "b"  # a's cache died with its process; b was chosen longest ago


def test_remembered_prefixes_are_bounded_and_evict_long_tails_first() -> None:
    chooser = CopyChooser(remembered=3)
    copies = [copy("a")]
    chooser.pick(copies, ("p1", "p2", "p3"))
    chooser.pick(copies, ("q1", "q2"))
    b = [copy("a"), copy("b")]
    # a keeps q1, q2 and p1 (the shortest of the older chain); p2 and p3 are gone.
    lease = chooser.pick(b, ("p1", "p2", "p3"))
    assert lease is not None and lease.copy.copy_id == "a"


def test_gone_idle_copies_are_forgotten_busy_ones_kept() -> None:
    chooser = CopyChooser()
    busy = chooser.pick([copy("a")])
    chooser.pick([copy("b")])
    chooser.pick([copy("c")])  # b is gone but still outstanding
    assert busy is not None
    assert chooser.outstanding("a") == 1
    busy.release()
    chooser.pick([copy("c")])
    assert chooser.outstanding("a") == 0 and "a" not in chooser._loads


def test_the_router_never_leases_a_copy_past_its_concurrency() -> None:
    chooser = CopyChooser()
    copies = [CopyStatus("a", "ic", CopyState.READY, url="http://a", pid=1, concurrency=2),
              CopyStatus("b", "ic", CopyState.READY, url="http://b", pid=1, concurrency=1)]
    leases = [chooser.pick(copies) for _ in range(4)]
    assert [lease.copy.copy_id if lease else None for lease in leases] == ["a", "b", "a", None]
    assert chooser.room() == 0 and chooser.in_flight == 3
    released: list[int] = []
    chooser.on_release = lambda: released.append(chooser.room())
    leases[1].release()  # type: ignore[union-attr]
    assert released == [1] and chooser.pick(copies).copy.copy_id == "b"  # type: ignore[union-attr]


def test_a_copy_without_reported_concurrency_takes_the_default() -> None:
    chooser = CopyChooser(default_concurrency=2)
    copies = [copy("a")]
    assert [chooser.pick(copies) is not None for _ in range(3)] == [True, True, False]


def holder(copy_id: str, outstanding: int = 0, models: tuple[str, ...] = (), concurrency: int | None = None
           ) -> Candidate:
    return Candidate(copy(copy_id), outstanding, 0, frozenset(), concurrency, frozenset(models))


TARGET_CASES = [
    # (name, candidates, target, expected): a multi-model endpoint's TargetModel goes where it is loaded.
    ("holder wins though busier", [holder("a", 0), holder("b", 3, ("m1",))], "m1", "b"),
    ("least busy holder", [holder("a", 2, ("m1",)), holder("b", 1, ("m1", "m2"))], "m1", "b"),
    ("no holder: least busy", [holder("a", 2, ("m2",)), holder("b", 1)], "m1", "b"),
    ("holder full: another copy loads it", [holder("a", 0), holder("b", 2, ("m1",), concurrency=2)], "m1", "a"),
    ("no target: holders mean nothing", [holder("a", 0), holder("b", 1, ("m1",))], None, "a"),
]


@pytest.mark.parametrize(("name", "candidates", "target", "expected"), TARGET_CASES, ids=[c[0] for c in TARGET_CASES])
def test_choose_sends_a_target_to_a_copy_that_holds_it(name: str, candidates: list[Candidate], target: str | None,
                                                       expected: str) -> None:
    chosen = choose(candidates, route=RequestRouting(model=target))
    assert chosen is not None and chosen.copy_id == expected


def test_router_learns_what_copies_hold() -> None:
    chooser = CopyChooser()
    copies = [copy("a"), copy("b")]
    first = chooser.pick(copies, route=RequestRouting(model="m1"))
    assert first is not None and first.copy.copy_id == "a"
    # While m1 loads on a, a second call for it follows it there, though b is idle.
    second = chooser.pick(copies, route=RequestRouting(model="m1"))
    assert second is not None and second.copy.copy_id == "a"
    first.release()
    second.release()
    chooser.holds("a", ["m2"])  # a's answer says it unloaded m1 for m2
    chooser.pick(copies, route=RequestRouting(model="m2")).release()  # type: ignore[union-attr]
    chosen = chooser.pick(copies, exclude=(), route=RequestRouting(model="m1"))
    assert chosen is not None and chosen.copy.copy_id == "b"  # least recently chosen: m1 is on neither now
