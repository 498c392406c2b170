"""The metric history: per-second sums in SQLite, periods, statistics, retention, and points kept through the
database's restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.history import Bucket, History, MetricId, aggregate, matches, statistic
from pier.state_folder.errors import StateUnavailable
from pier.state_folder.postgres import Postgres
from pier.state_folder.store import Driver
from tests.postgres import PostgresServer


def test_aggregate_merges_seconds_into_periods_from_the_start() -> None:
    seconds = [Bucket(100, 1, 2.0, 2.0, 2.0), Bucket(104, 2, 10.0, 4.0, 6.0), Bucket(110, 1, 1.0, 1.0, 1.0),
               Bucket(130, 1, 9.0, 9.0, 9.0)]
    periods = aggregate(seconds, 100, 130, 10)
    assert periods == [Bucket(100, 3, 12.0, 2.0, 6.0), Bucket(110, 1, 1.0, 1.0, 1.0)]  # 130 is past the end
    assert [statistic(periods[0], s) for s in ("SampleCount", "Sum", "Average", "Minimum", "Maximum")] == [
        3, 12.0, 4.0, 2.0, 6.0]
    with pytest.raises(ValueError, match="p99"):
        statistic(periods[0], "p99")


def test_history_sums_per_second_keeps_what_is_recent_and_lists_metrics(tmp_path: Path,
                                                                        driver: Driver | None) -> None:
    now = [1_000.0]
    history = History(Store.open(tmp_path, driver), retention_s=60, clock=lambda: now[0])
    dims = {"InferenceComponentName": "ic"}
    for value in (1.0, 3.0):
        history.record("AWS/SageMaker", "ModelLatency", dims, value, "Microseconds")
    history.record("AWS/SageMaker", "ModelLatency", dims, 5.0, "Microseconds", at=990.0)
    history.flush()
    history.record("AWS/SageMaker", "ModelLatency", dims, 7.0, "Microseconds")  # a second flush adds to the row
    metric = MetricId.of("AWS/SageMaker", "ModelLatency", dims)
    assert history.seconds(metric, 0, 2_000) == [Bucket(990, 1, 5.0, 5.0, 5.0), Bucket(1000, 3, 11.0, 1.0, 7.0)]
    assert history.window(metric, 5) == Bucket(1000, 3, 11.0, 1.0, 7.0)
    [(listed, unit)] = history.metrics()
    assert listed == metric and unit == "Microseconds"
    assert matches(listed, "AWS/SageMaker", None, [("InferenceComponentName", None)])
    assert not matches(listed, None, None, [("InferenceComponentName", "other")])
    now[0] = 1_055.0
    history.flush()  # 990 is now older than the 60 s retention (and the last pruning is more than 10 s ago)
    assert history.seconds(metric, 0, 2_000) == [Bucket(1000, 3, 11.0, 1.0, 7.0)]


def test_points_recorded_while_the_database_is_away_wait_for_the_next_flush(tmp_path: Path,
                                                                             postgres_server: PostgresServer) -> None:
    history = History(Store.open(tmp_path, Postgres(postgres_server.database())), retention_s=60,
                      clock=lambda: 1_000.0)
    dims = {"InferenceComponentName": "ic"}
    history.record("AWS/SageMaker", "Invocations", dims, 1.0)
    postgres_server.halt()
    try:
        with pytest.raises(StateUnavailable):
            history.flush()
    finally:
        postgres_server.start()
    history.record("AWS/SageMaker", "Invocations", dims, 2.0)
    history.flush()
    metric = MetricId.of("AWS/SageMaker", "Invocations", dims)
    assert history.seconds(metric, 0, 2_000) == [Bucket(1000, 2, 3.0, 1.0, 2.0)]
