"""The seeds' crowd table, from the requests of each level: pure functions, so the report's accounting is tested
without servers (tests/benchmarks/test_crowd_table.py).

Every request that was sent counts: one that timed out, could not connect, or got a 4xx/5xx (or an error inside
its stream) is a failure of the success rate, listed under its reason. Latency is the whole request, sent to
last byte, of the requests that succeeded (k6's `http_req_duration`, which the seed's table quotes).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pier.bench.request_record import RequestRecord

DEFAULT_LEVELS = (25, 50, 100, 200, 300, 500)


def parse_levels(text: str) -> tuple[int, ...]:
    """`--levels 25,50,100`: concurrent users per level, each 1 or more, in the order given."""
    try:
        levels = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"--levels takes comma-separated user counts such as 25,50,100; got {text!r}.") from None
    if not levels or any(level < 1 for level in levels):
        raise ValueError(f"--levels needs at least one user count, each 1 or more; got {text!r}.")
    return levels


@dataclass(frozen=True)
class Row:
    """One level of one server: what the seed's table shows, plus p99 and why requests failed."""

    users: int
    requests: int
    succeeded: int
    seconds: float  # from the first request sent to the last answer (requests started before the end are waited for)
    median_s: float | None
    p99_s: float | None
    failures: tuple[tuple[str, int, str], ...]  # (reason, count, an example message), most frequent first

    @classmethod
    def of(cls, users: int, records: Sequence[RequestRecord], seconds: float) -> Row:
        ok = sorted(r.end for r in records if r.ok and r.end is not None)
        return cls(users, len(records), len(ok), seconds, median(ok), percentile(ok, 99), failures(records))

    @property
    def throughput(self) -> float:
        """Successful requests per second, as k6 counts a run's throughput over its whole length."""
        return self.succeeded / self.seconds if self.seconds > 0 else 0.0

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.requests if self.requests else 0.0


def median(ordered: Sequence[float]) -> float | None:
    return statistics.median(ordered) if ordered else None


def percentile(ordered: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation (numpy's default), of values already sorted."""
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def failures(records: Sequence[RequestRecord]) -> tuple[tuple[str, int, str], ...]:
    """Failed requests by reason (the client's error code: an HTTP status, `timeout`, `connection_error`, ...)."""
    counts = Counter(r.error_code for r in records if r.error_code is not None)
    example = {r.error_code: r.error_message for r in reversed(records) if r.error_code is not None}
    return tuple((code, count, example[code]) for code, count in counts.most_common())


def seconds_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}s"


def seed_table(model: str, rows: Sequence[Row]) -> list[str]:
    """The seed's columns (model, users, requests, req/s, median latency, success rate) and the p99."""
    lines = [
        "| Model | Concurrent Users | requests | throughput (req/sec) | med. latency (sec) | p99 latency (sec) "
        "| success rate (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {model} | {row.users} | {row.requests} | {row.throughput:.2f}/s | {seconds_text(row.median_s)} | "
            f"{seconds_text(row.p99_s)} | {success_text(row)} |"
        )
    return lines


def success_text(row: Row) -> str:
    """100% only when every request succeeded: 999 of 1,000 reads 99.9%, never a rounded-up 100%."""
    if row.succeeded == row.requests and row.requests:
        return "100%"
    return f"{int(row.success_rate * 1000) / 10:.1f}%"


def ratio_lines(ours: Sequence[Row], theirs: Sequence[Row], names: tuple[str, str]) -> list[str]:
    """Per level both servers ran: ours / theirs for req/s (higher is better) and median latency (lower is)."""
    by_users = {row.users: row for row in theirs}
    lines = []
    for row in ours:
        other = by_users.get(row.users)
        if other is None:
            continue
        lines.append(
            f"- {row.users} users: {names[0]} / {names[1]} req/s {ratio(row.throughput, other.throughput)}, "
            f"median latency {ratio(row.median_s, other.median_s)}"
        )
    return lines


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def failure_lines(label: str, rows: Sequence[Row]) -> list[str]:
    """Every failed request of a server, by level and reason, with one message each (empty when none failed)."""
    return [
        f"- {label}, {row.users} users: {count} × `{reason}`: {message}"
        for row in rows
        for reason, count, message in row.failures
    ]
