"""A rolling inference-component update as SageMaker runs one (InferenceComponentDeploymentConfig's
RollingUpdatePolicy), decided batch by batch.

MaximumBatchSize copies at a time move to the new specification: each batch's new copies start beside the old
ones they replace (which serve until the new ones are ready, then drain), and once every copy of the batch has been
ready the batch bakes WaitIntervalInSeconds while the AutoRollbackConfiguration's alarms are watched. A new copy
that cannot become ready, an alarm in ALARM or MaximumExecutionTimeoutInSeconds running out rolls the update back:
RollbackMaximumBatchSize copies at a time (by default all of them at once, as on AWS) return to the old
specification, and the component ends InService on it with FailureReason saying why.

`roll_policy()` reads the config, `advance()` is the decision (pure), `on_new()` says which specification a copy
runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pier.control.deployment import DEFAULT_TIMEOUT_S
from pier.control.records import ComponentRecord, RolloutRecord


@dataclass(frozen=True)
class RollPolicy:
    batch: int
    rollback_batch: int
    wait_s: float
    timeout_s: float
    alarms: tuple[str, ...]


@dataclass(frozen=True)
class Seen:
    now: float
    healthy: bool  # every copy the component wants now has been ready
    problem: str = ""  # why a copy cannot become ready
    firing: tuple[str, ...] = ()  # the policy's alarms in ALARM


@dataclass(frozen=True)
class Roll:
    updated: int
    since: float
    baking: bool = False
    rolling_back: bool = False
    reason: str = ""
    outcome: str = ""  # "": still going; COMPLETED or ROLLED_BACK


COMPLETED, ROLLED_BACK = "completed", "rolled back"


def copies_of(size: dict[str, Any], copies: int) -> int:
    """An InferenceComponentCapacitySize in copies: COPY_COUNT, or CAPACITY_PERCENT of `copies` rounded up; at
    least 1, at most all."""
    value = int(size["Value"])
    count = math.ceil(copies * value / 100) if size["Type"] == "CAPACITY_PERCENT" else value
    return max(1, min(copies, count))


def roll_policy(config: dict[str, Any], copies: int) -> RollPolicy:
    rolling = config["RollingUpdatePolicy"]
    rollback = rolling.get("RollbackMaximumBatchSize")
    alarms = (config.get("AutoRollbackConfiguration") or {}).get("Alarms") or []
    batch, wait_s = copies_of(rolling["MaximumBatchSize"], copies), float(rolling.get("WaitIntervalInSeconds") or 0)
    # the default counts the policy's own baking (each batch's wait), as a blue/green update's does: many copies
    # baking one by one must not time out by waiting as told
    waits = -(-max(1, copies) // batch) * wait_s
    return RollPolicy(
        batch=batch,
        rollback_batch=copies_of(rollback, copies) if rollback else max(1, copies),
        wait_s=wait_s,
        timeout_s=float(rolling.get("MaximumExecutionTimeoutInSeconds") or DEFAULT_TIMEOUT_S + waits),
        alarms=tuple(a["AlarmName"] for a in alarms),
    )


def advance(policy: RollPolicy, copies: int, roll: Roll, started: float, seen: Seen) -> Roll:
    """The update's next state from `roll`, given what was seen."""
    if roll.rolling_back:
        if not seen.healthy:
            return roll  # the old copies of the last batch restored are still loading
        if roll.updated == 0:
            return Roll(0, roll.since, rolling_back=True, reason=roll.reason, outcome=ROLLED_BACK)
        return Roll(max(0, roll.updated - policy.rollback_batch), seen.now, rolling_back=True, reason=roll.reason)
    why = _why_back(policy, roll, started, seen)
    if why:
        return Roll(max(0, roll.updated - policy.rollback_batch), seen.now, rolling_back=True, reason=why)
    if not seen.healthy:
        return roll
    if not roll.baking:
        return Roll(roll.updated, seen.now, baking=True)
    if seen.now - roll.since < policy.wait_s:
        return roll
    if roll.updated >= copies:
        return Roll(copies, roll.since, baking=True, outcome=COMPLETED)
    return Roll(min(copies, roll.updated + policy.batch), seen.now)


def _why_back(policy: RollPolicy, roll: Roll, started: float, seen: Seen) -> str:
    if seen.problem:
        return f"A copy of the new specification could not become ready: {seen.problem}"
    if seen.firing:
        return (f"CloudWatch alarm(s) {', '.join(seen.firing)} went into ALARM with {roll.updated} copies on the new "
                "specification.")
    if seen.now - started > policy.timeout_s:
        return f"The update did not finish within MaximumExecutionTimeoutInSeconds ({policy.timeout_s:.0f} s)."
    return ""


def on_new(component: ComponentRecord, ordinal: int) -> bool:
    """Whether copy `ordinal` runs the component's new specification (its own fields) or the old one kept in its
    rollout: a rollout's lowest `updated` ordinals are new, once the new model's files are there."""
    rollout = component.rollout
    if rollout is None:
        return True
    if component.model_dir is None or component.weights_mb is None:
        return False
    return ordinal < rollout.updated


def state_of(rollout: RolloutRecord) -> Roll:
    return Roll(rollout.updated, rollout.since, rollout.baking, rollout.rolling_back, rollout.reason)
