"""The scaler's pure decisions, table-driven."""

from __future__ import annotations

import pytest

from pier.autoscaling.decide import (
    Ask,
    Bounds,
    Observation,
    StepAdjustment,
    Stepping,
    Tracking,
    asked_count,
    choose,
    step,
    track,
)

BOUNDS = Bounds(0, 4)


def seen(count: int, *, ready: int | None = None, now: float = 1000.0, last_scaling: float = 0.0,
         last_out: float = 0.0) -> Observation:
    return Observation(count, count if ready is None else ready, now, last_scaling, last_out)


@pytest.mark.parametrize(("count", "metric", "target", "asked"), [
    (1, 1.0, 1.0, 1),  # at the target: stay
    (1, 1.01, 1.0, 2),
    (2, 3.0, 1.0, 6),  # per-copy metric 3 on 2 copies, target 1: 6 copies
    (0, 2.0, 1.0, 2),  # no copies, requests waiting: normalized by at least one copy
    (3, 0.0, 5.0, 0),
    (4, 0.5, 1.0, 2),
])
def test_asked_count(count: int, metric: float, target: float, asked: int) -> None:
    assert asked_count(count, metric, target) == asked


TRACKING = Tracking(target=1.0, scale_out_cooldown_s=60, scale_in_cooldown_s=300)


@pytest.mark.parametrize(("policy", "observed", "metric", "peak", "expected"), [
    # out at once, whatever the cooldown, when the last scale-out's copies are ready
    (TRACKING, seen(1, last_scaling=990, last_out=990), 3.0, 3.0, 3),
    # out held while the last scale-out's copies are still starting within its cooldown
    (TRACKING, seen(3, ready=1, last_scaling=990, last_out=990), 3.0, 3.0, 3),
    # ... but not past the cooldown
    (TRACKING, seen(3, ready=1, last_scaling=900, last_out=900), 3.0, 3.0, 4),
    # clamped to MaxCapacity
    (TRACKING, seen(2), 10.0, 10.0, 4),
    # in: only after a whole cooldown since the last scaling, sized by the peak
    (TRACKING, seen(3, last_scaling=600), 0.0, 0.5, 2),
    (TRACKING, seen(3, last_scaling=800), 0.0, 0.5, 3),  # cooldown not over: the count is held
    (TRACKING, seen(1, last_scaling=0), 0.0, 0.0, 0),  # a whole cooldown idle: zero copies
    (Tracking(1.0, disable_scale_in=True), seen(3), 0.0, 0.0, None),
    (TRACKING, seen(2), None, None, None),  # no data: no opinion
])
def test_target_tracking(policy: Tracking, observed: Observation, metric: float | None, peak: float | None,
                         expected: int | None) -> None:
    ask = track(policy, observed, metric, peak, BOUNDS, "m")
    assert (ask.count if ask else None) == expected


CHANGE = Stepping("ChangeInCapacity", (StepAdjustment(0, None, 1),), cooldown_s=60)


@pytest.mark.parametrize(("policy", "observed", "breach", "expected"), [
    (CHANGE, seen(0), 0.0, 1),  # AWS's scale-from-zero recipe: +1 when the alarm's metric reaches the threshold
    (CHANGE, seen(0), -0.5, None),  # below every step's lower bound
    (CHANGE, seen(1, last_scaling=990), 0.0, None),  # within the cooldown of the last scaling (pier's wake-up)
    (CHANGE, seen(4), 2.0, None),  # already at MaxCapacity
    (Stepping("ExactCapacity", (StepAdjustment(None, 0, 1), StepAdjustment(0, None, 3))), seen(1), 5.0, 3),
    (Stepping("ExactCapacity", (StepAdjustment(None, 0, 1), StepAdjustment(0, None, 3))), seen(3), -1.0, 1),
    (Stepping("PercentChangeInCapacity", (StepAdjustment(0, None, 50),)), seen(3), 1.0, 4),  # 1.5 rounds away from zero
    (Stepping("PercentChangeInCapacity", (StepAdjustment(0, None, -10),), min_adjustment_magnitude=1), seen(3), 1.0, 2),
])
def test_step_scaling(policy: Stepping, observed: Observation, breach: float, expected: int | None) -> None:
    ask = step(policy, observed, breach, BOUNDS, "s")
    assert (ask.count if ask else None) == expected


@pytest.mark.parametrize(("count", "asks", "bounds", "expected"), [
    (2, [Ask(3, "a"), Ask(4, "b"), Ask(1, "c")], BOUNDS, 4),  # the largest ask for more wins
    (3, [Ask(1, "a"), Ask(3, "")], BOUNDS, None),  # one policy holds: no scale-in
    (3, [Ask(1, "a"), Ask(2, "b")], BOUNDS, 2),  # all ask for less: the largest of those
    (3, [None], BOUNDS, None),
    (0, [], Bounds(1, 4), 1),  # below MinCapacity: brought inside
    (6, [None], BOUNDS, 4),
])
def test_choose(count: int, asks: list[Ask | None], bounds: Bounds, expected: int | None) -> None:
    chosen = choose(count, asks, bounds)
    assert (chosen.count if chosen else None) == expected
