"""The metric history: every datapoint the gateway records, summed per second (sample count, sum, minimum,
maximum) per metric and dimension set, kept in the autoscaling store for `retention_s` and no longer.

Datapoints are gathered in memory and written in one transaction per `flush()` (the scaler flushes every tick,
a query flushes first), so a busy gateway writes a few rows a second, never one per request. A datapoint may stand
for many samples (PutMetricData's Counts, its StatisticValues): it is merged once, whatever its count. Recording
is thread-safe: the event loop records requests while the writer thread (gateway/writer.py) flushes.
`aggregate()` and `statistic()` are the pure part: what GetMetricStatistics does with the seconds of a period.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from pier.autoscaling.autoscaling_store import Store

Dimensions = Mapping[str, str]
STATISTICS = ("SampleCount", "Average", "Sum", "Minimum", "Maximum")
PRUNE_S = 10.0  # how often old datapoints are deleted


@dataclass(frozen=True)
class Bucket:
    """What was recorded in one second (or, aggregated, in one period starting at `ts`)."""

    ts: int
    count: float
    total: float
    low: float
    high: float

    def merged(self, other: Bucket) -> Bucket:
        return Bucket(min(self.ts, other.ts), self.count + other.count, self.total + other.total,
                      min(self.low, other.low), max(self.high, other.high))


@dataclass(frozen=True)
class MetricId:
    namespace: str
    name: str
    dims: tuple[tuple[str, str], ...]  # sorted by name

    @classmethod
    def of(cls, namespace: str, name: str, dims: Dimensions) -> MetricId:
        return cls(namespace, name, tuple(sorted(dims.items())))

    @property
    def key(self) -> str:
        return json.dumps(self.dims)


def statistic(bucket: Bucket, name: str) -> float:
    """One of CloudWatch's statistics over a bucket."""
    if name == "SampleCount":
        return bucket.count
    if name == "Sum":
        return bucket.total
    if name == "Minimum":
        return bucket.low
    if name == "Maximum":
        return bucket.high
    if name == "Average":
        return bucket.total / bucket.count if bucket.count else 0.0
    raise ValueError(f"unknown statistic {name!r}; pier computes {', '.join(STATISTICS)}")


def aggregate(buckets: Iterable[Bucket], start: float, end: float, period: int) -> list[Bucket]:
    """The seconds in [start, end) merged into periods of `period` seconds counted from `start`; periods without
    data are left out, as CloudWatch leaves them out."""
    periods: dict[int, Bucket] = {}
    for bucket in buckets:
        if not start <= bucket.ts < end:
            continue
        index = int((bucket.ts - start) // period)
        at = int(start + index * period)
        found = periods.get(at)
        shifted = Bucket(at, bucket.count, bucket.total, bucket.low, bucket.high)
        periods[at] = shifted if found is None else found.merged(shifted)
    return [periods[at] for at in sorted(periods)]


class History:
    def __init__(self, store: Store, *, retention_s: float, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.retention_s = retention_s
        self.clock = clock
        self._pending: dict[tuple[MetricId, int], tuple[Bucket, str]] = {}
        self._pruned = float("-inf")  # when the retention was last applied
        self._lock = threading.Lock()  # guards _pending: recorded on the loop, flushed on the writer thread

    def record(self, namespace: str, name: str, dims: Dimensions, value: float, unit: str = "None",
               at: float | None = None) -> None:
        if not math.isfinite(value):
            return
        self.record_samples(namespace, name, dims, Bucket(0, 1.0, value, value, value), unit, at)

    def record_samples(self, namespace: str, name: str, dims: Dimensions, samples: Bucket, unit: str = "None",
                       at: float | None = None) -> None:
        """`samples.count` samples at once, summed in `samples` (its `ts` is ignored): O(1) whatever the count."""
        if samples.count <= 0 or not all(map(math.isfinite, (samples.count, samples.total, samples.low,
                                                              samples.high))):
            return
        metric = MetricId.of(namespace, name, dims)
        second = int(self.clock() if at is None else at)
        point = Bucket(second, samples.count, samples.total, samples.low, samples.high)
        with self._lock:
            found = self._pending.get((metric, second))
            self._pending[(metric, second)] = (point if found is None else found[0].merged(point), unit)

    def flush(self) -> None:
        """Write what was recorded since the last flush, and (every PRUNE_S) drop what is older than the
        retention."""
        now = self.clock()
        prune = now - self._pruned >= PRUNE_S
        with self._lock:
            if not self._pending and not prune:
                return
            pending, self._pending = self._pending, {}
        cutoff = int(now - self.retention_s)
        if prune:
            self._pruned = now
        try:
            with self.store.transaction() as db:
                db.executemany(
                    "INSERT INTO datapoints (namespace, name, dims, ts, count, total, low, high, unit) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, name, dims, ts) DO UPDATE SET "
                    "count = datapoints.count + excluded.count, total = datapoints.total + excluded.total, "
                    "low = MIN(datapoints.low, excluded.low), high = MAX(datapoints.high, excluded.high)",
                    [(m.namespace, m.name, m.key, ts, b.count, b.total, b.low, b.high, unit)
                     for (m, ts), (b, unit) in pending.items()])
                if prune:
                    db.execute("DELETE FROM datapoints WHERE ts < ?", (cutoff,))
        except BaseException:  # the database away (it restarts): the points wait for the next flush
            with self._lock:
                for key, (point, unit) in pending.items():
                    found = self._pending.get(key)
                    self._pending[key] = (point if found is None else found[0].merged(point), unit)
            raise

    def seconds(self, metric: MetricId, start: float, end: float) -> list[Bucket]:
        """The recorded seconds of one metric in [start, end)."""
        self.flush()
        with self.store.lock:
            rows = self.store.db.execute(
                "SELECT ts, count, total, low, high FROM datapoints WHERE namespace = ? AND name = ? AND dims = ? "
                "AND ts >= ? AND ts < ? ORDER BY ts",
                (metric.namespace, metric.name, metric.key, math.floor(start), math.ceil(end))).fetchall()
        return [Bucket(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def window(self, metric: MetricId, seconds: float, now: float | None = None) -> Bucket | None:
        """Everything recorded in the last `seconds` as one bucket; None when nothing was."""
        now = self.clock() if now is None else now
        found = self.seconds(metric, now - seconds, now + 1)
        if not found:
            return None
        merged = found[0]
        for bucket in found[1:]:
            merged = merged.merged(bucket)
        return merged

    def metrics(self) -> list[tuple[MetricId, str]]:
        """Every metric with history, and its unit."""
        self.flush()
        with self.store.lock:
            rows = self.store.db.execute(
                "SELECT namespace, name, dims, MAX(unit) FROM datapoints GROUP BY namespace, name, dims "
                "ORDER BY namespace, name, dims").fetchall()
        return [(MetricId(r[0], r[1], tuple(tuple(d) for d in json.loads(r[2]))), r[3]) for r in rows]


def matches(metric: MetricId, namespace: str | None, name: str | None,
            dims: Sequence[tuple[str, str | None]]) -> bool:
    """ListMetrics' filter: each wanted dimension present (with its value, when one is given)."""
    if namespace is not None and metric.namespace != namespace:
        return False
    if name is not None and metric.name != name:
        return False
    have = dict(metric.dims)
    return all(key in have and (value is None or have[key] == value) for key, value in dims)
