"""Engine step times by kind: which bucket a time lands in, and what a step counts as."""

from __future__ import annotations

import pytest

from pier.engine.step_times import STEP_BUCKETS, StepKind, StepTimes, step_kind


@pytest.mark.parametrize(("decode_rows", "prompt_tokens", "kind"), [
    (8, 0, StepKind.DECODE),
    (1, 0, StepKind.DECODE),
    (3, 40, StepKind.MIXED),
    (1, 512, StepKind.MIXED),
    (0, 64, StepKind.PROMPT),
])
def test_a_step_counts_by_what_it_carried(decode_rows: int, prompt_tokens: int, kind: StepKind) -> None:
    assert step_kind(decode_rows, prompt_tokens) is kind


@pytest.mark.parametrize(("seconds", "bucket"), [
    (0.0001, 0),  # under the first bound
    (0.0005, 0),  # a bound holds the times equal to it (Prometheus' le)
    (0.0006, 1),
    (0.004, STEP_BUCKETS.index(0.004)),
    (0.17, STEP_BUCKETS.index(0.25)),
    (9.0, len(STEP_BUCKETS)),  # above every bound: +Inf
])
def test_a_time_lands_in_the_first_bucket_that_holds_it(seconds: float, bucket: int) -> None:
    times = StepTimes()
    times.record(2, 0, seconds, seconds)
    counts = times.snapshot().forward[StepKind.DECODE].counts
    assert counts[bucket] == 1 and sum(counts) == 1


def test_forward_and_whole_step_are_kept_apart_per_kind() -> None:
    times = StepTimes()
    times.record(4, 0, 0.001, 0.0012)
    times.record(4, 0, 0.002, 0.0025)
    times.record(4, 32, 0.003, 0.004)
    snapshot = times.snapshot()
    assert snapshot.forward[StepKind.DECODE].count == 2
    assert snapshot.forward[StepKind.DECODE].total_s == pytest.approx(0.003)
    assert snapshot.step[StepKind.DECODE].total_s == pytest.approx(0.0037)
    assert snapshot.forward[StepKind.MIXED].count == 1 == snapshot.step[StepKind.MIXED].count
    assert snapshot.forward[StepKind.PROMPT].count == 0


def test_a_snapshot_does_not_move_with_later_steps() -> None:
    times = StepTimes()
    times.record(1, 0, 0.001, 0.001)
    before = times.snapshot()
    times.record(1, 0, 0.001, 0.001)
    assert before.forward[StepKind.DECODE].count == 1
    assert times.snapshot().forward[StepKind.DECODE].count == 2
