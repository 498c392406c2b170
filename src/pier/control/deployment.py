"""A blue/green endpoint update as SageMaker runs one (DeploymentConfig.BlueGreenUpdatePolicy), decided step by step.

The new config's copies (the green fleet) start beside the old ones (blue), which keep all the traffic until every
green copy has been ready. Then traffic moves to green in the policy's steps: ALL_AT_ONCE (all of it), CANARY
(CanarySize of it, then the rest) or LINEAR (LinearStepSize at a time), each step baking WaitIntervalInSeconds
while the AutoRollbackConfiguration's alarms are watched; at all of it, TerminationWaitInSeconds more, and the
update completes (green becomes the endpoint's, blue stops). Green failing to become healthy, an alarm in ALARM
while green takes traffic, or MaximumExecutionTimeoutInSeconds running out rolls the update back: green stops
and blue keeps serving, as if nothing happened but for FailureReason.

`policy_of()` reads a DeploymentConfig; `advance()` is the decision, pure over what the driver (pier.control.
deployer) observed; `share()` is how much of the traffic green gets at a step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pier.control.records import DeploymentRecord, EndpointRecord, VariantRecord
from pier.control.shapes import UpdateEndpointInput

# SageMaker's default when UpdateEndpoint has no DeploymentConfig: blue/green, all traffic at once, no baking.
DEFAULT_ROUTING: dict[str, Any] = {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0}
# AWS documents no default timeout; pier gives up on a fleet that is not healthy an hour past the policy's waits.
DEFAULT_TIMEOUT_S = 3600.0
# TrafficRoutingConfig.LinearStepSize: "Value must be 10-50% of the variant's total instance count."
LINEAR_RANGE = (0.1, 0.5)


@dataclass(frozen=True)
class Policy:
    shares: tuple[float, ...]  # green's cumulative share of traffic at each step; the last is 1.0
    wait_s: float  # baking after each step
    termination_wait_s: float  # at all traffic, before blue stops
    timeout_s: float
    alarms: tuple[str, ...]


@dataclass(frozen=True)
class GreenSeen:
    """What the driver saw of the green fleet this tick."""

    now: float
    healthy: bool  # every green copy has been ready
    problem: str = ""  # why green cannot become healthy (a fetch failed, a copy gave up, no room)
    firing: tuple[str, ...] = ()  # the policy's alarms now in ALARM


@dataclass(frozen=True)
class Next:
    step: int
    since: float
    outcome: str = ""  # "": still going; COMPLETED or ROLLED_BACK
    reason: str = ""  # why it rolled back


COMPLETED, ROLLED_BACK = "completed", "rolled back"


def policy_of(config: dict[str, Any] | None, instances: int) -> Policy:
    """The policy of a DeploymentConfig (None: SageMaker's default) for a fleet of `instances`."""
    config = config or {}
    blue_green = config.get("BlueGreenUpdatePolicy") or {}
    routing = blue_green.get("TrafficRoutingConfiguration") or DEFAULT_ROUTING
    alarms = (config.get("AutoRollbackConfiguration") or {}).get("Alarms") or []
    steps = shares(routing, instances)
    wait_s = float(routing.get("WaitIntervalInSeconds") or 0)
    termination_wait_s = float(blue_green.get("TerminationWaitInSeconds") or 0)
    # Without a timeout of its own an update must not time out merely by baking (LINEAR 10% of an hour each).
    waits = waiting_s(steps, wait_s, termination_wait_s)
    return Policy(
        shares=steps, wait_s=wait_s, termination_wait_s=termination_wait_s,
        timeout_s=float(blue_green.get("MaximumExecutionTimeoutInSeconds") or DEFAULT_TIMEOUT_S + waits),
        alarms=tuple(a["AlarmName"] for a in alarms),
    )


def waiting_s(steps: tuple[float, ...], wait_s: float, termination_wait_s: float) -> float:
    """How long an update bakes once its new fleet is healthy: each step's wait, then the termination wait."""
    return len(steps) * wait_s + termination_wait_s


def shares(routing: dict[str, Any], instances: int) -> tuple[float, ...]:
    """Green's cumulative share of traffic at each step of a TrafficRoutingConfiguration."""
    kind = routing.get("Type", "ALL_AT_ONCE")
    if kind == "CANARY":
        first = fraction(routing["CanarySize"], instances)
        return (first, 1.0) if first < 1.0 else (1.0,)
    if kind == "LINEAR":
        step = fraction(routing["LinearStepSize"], instances)
        count = math.ceil(1.0 / step - 1e-9)
        return (*(min(1.0, step * (k + 1)) for k in range(count - 1)), 1.0)
    return (1.0,)


def fraction(size: dict[str, Any], instances: int) -> float:
    """A CapacitySize as a share of the fleet: INSTANCE_COUNT of `instances`, or CAPACITY_PERCENT."""
    return min(1.0, raw_fraction(size, instances))


def check(config: dict[str, Any], instances: int) -> str:
    """Why a DeploymentConfig cannot run on an endpoint of `instances`, in SageMaker's terms; "" when it can."""
    blue_green = config.get("BlueGreenUpdatePolicy")
    if config.get("RollingUpdatePolicy") is not None:
        if blue_green is not None:
            return "Give either BlueGreenUpdatePolicy or RollingUpdatePolicy in DeploymentConfig, not both."
        return ("pier runs endpoint updates blue/green: give BlueGreenUpdatePolicy (RollingUpdatePolicy is served "
                "for inference components, by UpdateInferenceComponent).")
    routing = (blue_green or {}).get("TrafficRoutingConfiguration") or {}
    for kind, field in (("CANARY", "CanarySize"), ("LINEAR", "LinearStepSize")):
        if routing.get("Type") == kind:
            if routing.get(field) is None:
                return f"TrafficRoutingConfiguration of Type {kind} needs {field}."
            if kind == "CANARY" and fraction(routing[field], instances) > 0.5:
                return (f"CanarySize must be at most 50% of the variant's total instance count ({instances}): a "
                        "canary takes part of the traffic, not most of it.")
            if kind == "LINEAR" and not _within(raw_fraction(routing[field], instances), LINEAR_RANGE):
                return (f"LinearStepSize must be 10-50% of the variant's total instance count ({instances}): "
                        "traffic moves in at least two steps, none smaller than a tenth of it.")
    return _timeout_problem(config, instances)


def _within(value: float, bounds: tuple[float, float]) -> bool:
    return bounds[0] - 1e-9 <= value <= bounds[1] + 1e-9


def raw_fraction(size: dict[str, Any], instances: int) -> float:
    """A CapacitySize as a share of the fleet, not capped at all of it (what the user asked for)."""
    value = float(size["Value"])
    return value / 100.0 if size["Type"] == "CAPACITY_PERCENT" else value / max(1, instances)


def _timeout_problem(config: dict[str, Any], instances: int) -> str:
    """AWS: the timeout "should be larger than the total waiting time"; one that is not could only roll back."""
    given = (config.get("BlueGreenUpdatePolicy") or {}).get("MaximumExecutionTimeoutInSeconds")
    policy = policy_of(config, instances)
    waits = waiting_s(policy.shares, policy.wait_s, policy.termination_wait_s)
    if given is None or float(given) > waits:
        return ""
    return (f"MaximumExecutionTimeoutInSeconds ({given}) must be larger than the update's total waiting time "
            f"({waits:.0f} s: WaitIntervalInSeconds after each of its {len(policy.shares)} traffic step(s), then "
            "TerminationWaitInSeconds), or it could only time out and roll back: raise it, or shorten the waits.")


def share(policy: Policy, step: int) -> float:
    """Green's share of traffic at `step` (-1, provisioning: none)."""
    if step < 0:
        return 0.0
    return policy.shares[min(step, len(policy.shares) - 1)]


def advance(policy: Policy, step: int, since: float, started: float, seen: GreenSeen) -> Next:
    """The deployment's next step from `step` (begun at `since`), given what was seen."""
    last = len(policy.shares)  # the termination wait, at all traffic
    if seen.problem:
        return Next(step, since, ROLLED_BACK, f"The new fleet could not become healthy: {seen.problem}")
    if step >= 0 and seen.firing:
        return Next(step, since, ROLLED_BACK, f"CloudWatch alarm(s) {', '.join(seen.firing)} went into ALARM "
                                              f"while the new fleet took {share(policy, step):.0%} of the traffic.")
    if seen.now - started > policy.timeout_s:
        return Next(step, since, ROLLED_BACK, f"The update did not finish within MaximumExecutionTimeoutInSeconds "
                                              f"({policy.timeout_s:.0f} s).")
    if not seen.healthy:
        # No more traffic to a fleet that is not all ready (loading again after a gateway restart), and the old
        # fleet does not stop under it: the update holds; an alarm or the timeout still rolls it back.
        return Next(step, since)
    if step < 0:
        return Next(0, seen.now)
    waited = seen.now - since
    if step < last - 1 and waited >= policy.wait_s:
        return Next(step + 1, seen.now)
    if step == last - 1 and waited >= policy.wait_s:
        return Next(last, seen.now) if policy.termination_wait_s > 0 else Next(last, seen.now, COMPLETED)
    if step >= last and waited >= policy.termination_wait_s:
        return Next(step, since, COMPLETED)
    return Next(step, since)


def phase(step: int, policy: Policy) -> str:
    """Where an update stands, in words for logs and the console."""
    if step < 0:
        return "provisioning the new fleet"
    if step >= len(policy.shares):
        return "terminating the old fleet"
    return f"baking at {share(policy, step):.0%} of traffic on the new fleet"


def pick_fleet(green_share: float, draw: float) -> bool:
    """Whether a request goes to the green fleet, for a uniform `draw` in [0, 1)."""
    return draw < green_share


def green_share(pending: DeploymentRecord) -> float:
    """How much of the endpoint's traffic the update's new fleet takes now."""
    return share(policy_of(pending.config, instances(pending.variants)), pending.step)


def instances(variants: Sequence[VariantRecord]) -> int:
    return sum(v.instance_count for v in variants if v.model is not None)


def deployment_config(record: EndpointRecord, request: UpdateEndpointInput) -> dict[str, Any]:
    """The DeploymentConfig an update runs by: the request's, else (RetainDeploymentConfig) the last one's."""
    if request.DeploymentConfig is not None:
        return request.DeploymentConfig
    if request.RetainDeploymentConfig:
        return record.last_deployment_config or {}
    return {}


def retained(current: Sequence[VariantRecord], new: Sequence[VariantRecord], request: UpdateEndpointInput
             ) -> tuple[VariantRecord, ...]:
    """RetainAllVariantProperties: a variant the endpoint already has keeps its instance count and weight (as
    UpdateEndpointWeightsAndCapacities or autoscaling left them) unless ExcludeRetainedVariantProperties names
    DesiredInstanceCount or DesiredWeight, which the new config's values then override."""
    if not request.RetainAllVariantProperties:
        return tuple(new)
    excluded = {p.get("VariantPropertyType") for p in request.ExcludeRetainedVariantProperties}
    by_name = {v.name: v for v in current}
    kept = []
    for variant in new:
        old = by_name.get(variant.name)
        change: dict[str, Any] = {}
        if old is not None and "DesiredInstanceCount" not in excluded:
            change["instance_count"] = old.instance_count
        if old is not None and "DesiredWeight" not in excluded:
            change["weight"] = old.weight
        kept.append(variant.model_copy(update=change))
    return tuple(kept)
