"""The relay ceiling benchmark's pure parts: counting tokens and their delays in what a client receives, a
process's CPU seconds, and the arithmetic of gateway processes per host."""

from __future__ import annotations

import os

import pytest
from relay_ceiling import TOKEN_MARK, Ceiling, Tally, cpu_seconds, percentile, token_event

SENT_NS = 1_700_000_000_000_000_000


def test_a_token_event_carries_its_mark_and_send_time() -> None:
    event = token_event(3, SENT_NS)
    assert event.startswith(b"data: {") and event.endswith(b"\n\n")
    assert event.count(TOKEN_MARK) == 1 and str(SENT_NS).encode() in event


@pytest.mark.parametrize(("chunks", "tokens", "delays_ms"), [
    ([token_event(0, SENT_NS)], 1, [2.0]),
    ([token_event(0, SENT_NS - 5_000_000) + token_event(1, SENT_NS)], 2, [2.0]),  # the newest token is sampled
    ([b"data: [DONE]\n\n"], 0, []),
    ([token_event(0, SENT_NS)[:-12]], 1, []),  # its time cut short: counted, not sampled
])
def test_a_tally_counts_tokens_and_samples_the_newest_delay(chunks: list[bytes], tokens: int,
                                                              delays_ms: list[float]) -> None:
    tally = Tally()
    for chunk in chunks:
        tally.feed(chunk, SENT_NS + 2_000_000)
    assert tally.tokens == tokens
    assert [round(d * 1e3, 3) for d in tally.delays_s or []] == delays_ms


def test_cpu_seconds_reads_user_and_system_time_past_a_name_with_spaces() -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", *["0"] * 10, str(3 * ticks), str(ticks), *["0"] * 30]
    assert cpu_seconds("42 (a (b) c) " + " ".join(fields)) == 4.0


@pytest.mark.parametrize(("values", "q", "expected"), [([3.0, 1.0, 2.0], 0.5, 2.0), ([1.0, 2.0], 0.99, 2.0)])
def test_percentile(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == expected


@pytest.mark.parametrize(("tokens_per_s", "cpu_s", "host", "processes"), [
    (10_000, 1.0, 2_000, 0.2),  # a host making 2,000 tok/s keeps a fifth of one gateway core busy
    (5_000, 0.5, 20_000, 2.0),
])
def test_ceiling_says_how_many_gateway_processes_a_host_needs(tokens_per_s: float, cpu_s: float, host: float,
                                                              processes: float) -> None:
    assert Ceiling(tokens_per_s, cpu_s).processes_for(host) == pytest.approx(processes)
