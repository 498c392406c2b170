"""The state_url benchmark's pure parts: latency percentiles, clients spread over gateways, which gateway leads,
the takeover figures, each process's share of the host's CPU and what a request costs in CPU."""

from __future__ import annotations

import math

import pytest
from state_url import HOST_BUSY, leader_of, per_request, shares, spread, summary, takeover


def test_a_summary_gives_p50_and_p99_in_milliseconds() -> None:
    # relay_ceiling's percentile: the value at rank q x n (no interpolation)
    assert summary([i / 1000 for i in range(1, 101)]) == {"calls": 100, "p50_ms": 51.0, "p99_ms": 100.0}


@pytest.mark.parametrize(("clients", "urls", "expected"), [
    (4, ["a"], ["a", "a", "a", "a"]),
    (5, ["a", "b"], ["a", "b", "a", "b", "a"]),  # one gateway gets one more: never more
    (0, ["a", "b"], []),
])
def test_clients_are_spread_round_robin(clients: int, urls: list[str], expected: list[str]) -> None:
    assert spread(clients, urls) == expected


@pytest.mark.parametrize(("abouts", "expected"), [
    ({"a": {"role": "leader"}, "b": {"role": "follower"}}, "a"),
    ({"a": {"role": "follower"}, "b": {"role": "leader"}}, "b"),
    ({"a": {"role": "follower"}, "b": {}}, None),  # b does not answer (killed): nobody leads yet
    ({"a": {"role": "leader"}, "b": {"role": "leader"}}, None),  # never taken as an answer
])
def test_the_leader_is_the_one_gateway_that_says_so(abouts: dict[str, dict[str, str]], expected: str | None) -> None:
    assert leader_of(abouts) == expected


def test_takeover_is_its_median_and_worst() -> None:
    assert takeover([3.9, 4.1, 3.5]) == {"kills": 3, "p50_s": 3.9, "max_s": 4.1}
    assert math.isnan(takeover([])["max_s"])


def test_shares_are_of_the_host_and_the_rest_is_others_and_idle() -> None:
    cpu = {"gateway 1": 4.0, "clients": 2.0, HOST_BUSY: 16.0}  # 2 cores for 10 s: 20 CPU seconds
    assert shares(cpu, 10.0, 2) == {"gateway 1": 0.2, "clients": 0.1, "others": 0.5, "idle": 0.2}
    assert shares({"gateway 1": 5.0}, 10.0, 1) == {"gateway 1": 0.5}  # without the host's figure, no guess


def test_what_a_request_costs_is_each_parts_cpu_over_the_requests() -> None:
    cpu = {"gateway 1": 1.0, "gateway 2": 1.0, "clients": 0.5, "postgres": 0.25, HOST_BUSY: 9.0}
    assert per_request(cpu, 1000) == {"gateways": 2.0, "clients": 0.5, "postgres": 0.25, "total": 2.75}
