"""The scaler's decisions, pure: what copy or instance count a target-tracking or step-scaling policy asks for,
and which of several asks wins.

Target tracking scales out fast and in slowly:
- out: as soon as the metric, as it is now, asks for more than there is. ScaleOutCooldown holds a
  further scale-out back only while the count the last one added is still starting: pier knows when copies
  are ready, so it never waits longer than that for their effect.
- in: only when the metric's *peak* over the last ScaleInCooldown still asks for less, and no scaling happened
  in that time; never with DisableScaleIn. Capacity 0 (MinCapacity 0) is reached that way: a whole cooldown
  with no load at all.
The count asked for is `ceil(count * metric / target)`, the metric normalized by the count (at least
1), so an idle target with a queue (count 0, metric > 0) asks for copies too.

Several policies on one target: the largest ask for more wins; the count goes down only when every policy
asks for less (the largest of those asks). Everything is clamped to [MinCapacity, MaxCapacity].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EPSILON = 1e-9  # a metric exactly at the target asks for the count there is, not one more


@dataclass(frozen=True)
class Bounds:
    low: int
    high: int

    def clamp(self, count: int) -> int:
        return max(self.low, min(self.high, count))


@dataclass(frozen=True)
class Tracking:
    target: float
    scale_out_cooldown_s: float = 300.0
    scale_in_cooldown_s: float = 300.0
    disable_scale_in: bool = False


@dataclass(frozen=True)
class Observation:
    """What the scaler saw of one target now."""

    count: int  # desired (the stored copy or instance count)
    ready: int  # of those, ready now
    now: float
    last_scaling: float  # when the count last changed (or the target was registered)
    last_scale_out: float


@dataclass(frozen=True)
class Ask:
    count: int
    cause: str


def asked_count(count: int, metric: float, target: float) -> int:
    return max(0, math.ceil(max(count, 1) * metric / target - EPSILON))


def track(policy: Tracking, seen: Observation, metric: float | None, peak: float | None, bounds: Bounds,
          label: str) -> Ask | None:
    """Target tracking's ask: `metric` is the metric now, `peak` its highest over the scale-in cooldown (None:
    no data, which asks for nothing)."""
    if metric is not None:
        wanted = bounds.clamp(asked_count(seen.count, metric, policy.target))
        starting = seen.ready < seen.count and seen.now - seen.last_scale_out < policy.scale_out_cooldown_s
        if wanted > seen.count and not starting:
            return Ask(wanted, f"{label} = {metric:.3g} is above the target {policy.target:g}")
    if policy.disable_scale_in or peak is None:
        return None
    if seen.now - seen.last_scaling < policy.scale_in_cooldown_s:
        return Ask(seen.count, "")  # too soon to scale in: holds the count
    wanted = bounds.clamp(asked_count(seen.count, peak, policy.target))
    if wanted < seen.count:
        return Ask(wanted, f"{label} stayed at or below {peak:.3g} for {policy.scale_in_cooldown_s:g} s, under the "
                           f"target {policy.target:g}")
    return Ask(seen.count, "")  # holds the count: keeps other policies from scaling in


@dataclass(frozen=True)
class StepAdjustment:
    lower: float | None  # MetricIntervalLowerBound (relative to the alarm's threshold); None: minus infinity
    upper: float | None  # MetricIntervalUpperBound; None: infinity
    adjustment: int


@dataclass(frozen=True)
class Stepping:
    adjustment_type: str  # ChangeInCapacity | ExactCapacity | PercentChangeInCapacity
    steps: tuple[StepAdjustment, ...]
    cooldown_s: float = 0.0
    min_adjustment_magnitude: int = 0


def step(policy: Stepping, seen: Observation, breach: float, bounds: Bounds, label: str) -> Ask | None:
    """A step policy's ask when its alarm is in ALARM, `breach` being the metric minus the alarm's threshold."""
    if seen.now - seen.last_scaling < policy.cooldown_s:
        return None
    found = next((s for s in policy.steps if _within(s, breach)), None)
    if found is None:
        return None
    wanted = bounds.clamp(adjusted(policy, seen.count, found.adjustment))
    if wanted == seen.count:
        return None
    return Ask(wanted, f"{label}: {found.adjustment:+d} ({policy.adjustment_type})")


def adjusted(policy: Stepping, count: int, adjustment: int) -> int:
    if policy.adjustment_type == "ExactCapacity":
        return adjustment
    if policy.adjustment_type == "PercentChangeInCapacity":
        change = count * adjustment / 100.0
        change = math.ceil(change) if change > 0 else math.floor(change)  # away from zero, as AWS rounds
        if abs(change) < policy.min_adjustment_magnitude:
            change = int(math.copysign(policy.min_adjustment_magnitude, adjustment))
        return count + int(change)
    return count + adjustment


def _within(found: StepAdjustment, breach: float) -> bool:
    above = found.lower is None or breach >= found.lower
    below = found.upper is None or breach < found.upper
    return above and below


def choose(count: int, asks: Sequence[Ask | None], bounds: Bounds) -> Ask | None:
    """The count to go to, or None to stay: out when any policy asks for more, in only when all ask for less,
    and back inside the bounds whatever they ask."""
    given = [a for a in asks if a is not None]
    more = [a for a in given if a.count > count]
    if more:
        return max(more, key=lambda a: a.count)
    if given and all(a.count < count for a in given):
        return max(given, key=lambda a: a.count)
    inside = bounds.clamp(count)
    if inside != count:
        return Ask(inside, f"the capacity {count} was outside the target's bounds [{bounds.low}, {bounds.high}]")
    return None
