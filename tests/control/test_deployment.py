"""The blue/green planner: a DeploymentConfig's traffic steps, and each step's next one, table-tested."""

from __future__ import annotations

from typing import Any

import pytest

from pier.control.deployment import (
    COMPLETED,
    ROLLED_BACK,
    GreenSeen,
    Next,
    Policy,
    advance,
    check,
    policy_of,
    retained,
    share,
    shares,
)
from pier.control.records import VariantRecord
from pier.control.shapes import UpdateEndpointInput


def count(value: int) -> dict[str, Any]:
    return {"Type": "INSTANCE_COUNT", "Value": value}


def percent(value: int) -> dict[str, Any]:
    return {"Type": "CAPACITY_PERCENT", "Value": value}


@pytest.mark.parametrize(("routing", "instances", "expected"), [
    ({"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 0}, 4, (1.0,)),
    ({"Type": "CANARY", "WaitIntervalInSeconds": 5, "CanarySize": count(1)}, 4, (0.25, 1.0)),
    ({"Type": "CANARY", "WaitIntervalInSeconds": 5, "CanarySize": percent(10)}, 1, (0.1, 1.0)),
    ({"Type": "CANARY", "WaitIntervalInSeconds": 5, "CanarySize": count(1)}, 1, (1.0,)),
    ({"Type": "LINEAR", "WaitIntervalInSeconds": 5, "LinearStepSize": percent(25)}, 2, (0.25, 0.5, 0.75, 1.0)),
    ({"Type": "LINEAR", "WaitIntervalInSeconds": 5, "LinearStepSize": count(2)}, 5, (0.4, 0.8, 1.0)),
    ({"Type": "LINEAR", "WaitIntervalInSeconds": 5, "LinearStepSize": percent(50)}, 3, (0.5, 1.0)),
])
def test_traffic_steps(routing: dict[str, Any], instances: int, expected: tuple[float, ...]) -> None:
    assert shares(routing, instances) == pytest.approx(expected)


def test_no_deployment_config_is_all_at_once_without_baking() -> None:
    assert policy_of(None, 3) == Policy((1.0,), 0.0, 0.0, 3600.0, ())


def test_a_full_policy() -> None:
    policy = policy_of({"BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 7, "CanarySize": percent(20)},
        "TerminationWaitInSeconds": 3, "MaximumExecutionTimeoutInSeconds": 900},
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "errors"}, {"AlarmName": "latency"}]}}, 1)
    assert policy == Policy((0.2, 1.0), 7.0, 3.0, 900.0, ("errors", "latency"))


@pytest.mark.parametrize(("config", "instances", "problem"), [
    ({}, 1, ""),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 1,
                                                                "CanarySize": percent(50)}}}, 1, ""),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 1,
                                                                "CanarySize": count(3)}}}, 4, "at most 50%"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 1}}},
     1, "needs CanarySize"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1}}},
     1, "needs LinearStepSize"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1,
                                                                "LinearStepSize": percent(150)}}}, 1, "10-50%"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1,
                                                                "LinearStepSize": count(4)}}}, 4, "10-50%"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1,
                                                                "LinearStepSize": percent(5)}}}, 1, "10-50%"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1,
                                                                "LinearStepSize": count(2)}}}, 4, ""),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 1,
                                                                "LinearStepSize": percent(10)}}}, 1, ""),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "CANARY", "WaitIntervalInSeconds": 600,
                                                                "CanarySize": percent(10)},
                                "MaximumExecutionTimeoutInSeconds": 600}}, 1, "larger than"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300},
                                "TerminationWaitInSeconds": 300, "MaximumExecutionTimeoutInSeconds": 600}},
     1, "larger than"),
    ({"BlueGreenUpdatePolicy": {"TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300},
                                "TerminationWaitInSeconds": 200, "MaximumExecutionTimeoutInSeconds": 600}}, 1, ""),
    ({"RollingUpdatePolicy": {"MaximumBatchSize": count(1), "WaitIntervalInSeconds": 1}}, 2, "blue/green"),
    ({"RollingUpdatePolicy": {}, "BlueGreenUpdatePolicy": {}}, 2, "not both"),
])
def test_check(config: dict[str, Any], instances: int, problem: str) -> None:
    found = check(config, instances)
    assert (problem in found) if problem else found == ""


CANARY = Policy((0.25, 1.0), wait_s=10, termination_wait_s=5, timeout_s=600, alarms=("errors",))
NO_WAITS = Policy((1.0,), wait_s=0, termination_wait_s=0, timeout_s=600, alarms=())


@pytest.mark.parametrize(("policy", "step", "since", "seen", "expected"), [
    # provisioning: no traffic until every new copy has been ready
    (CANARY, -1, 0, GreenSeen(3, healthy=False), Next(-1, 0)),
    (CANARY, -1, 0, GreenSeen(3, healthy=True), Next(0, 3)),
    # an alarm before the new fleet takes traffic says nothing about it
    (CANARY, -1, 0, GreenSeen(3, healthy=False, firing=("errors",)), Next(-1, 0)),
    # the canary bakes its wait, then the rest moves, bakes, and the old fleet waits out its termination
    (CANARY, 0, 3, GreenSeen(12, healthy=True), Next(0, 3)),
    (CANARY, 0, 3, GreenSeen(13, healthy=True), Next(1, 13)),
    (CANARY, 1, 13, GreenSeen(23, healthy=True), Next(2, 23)),
    (CANARY, 2, 23, GreenSeen(27, healthy=True), Next(2, 23)),
    (CANARY, 2, 23, GreenSeen(28, healthy=True), Next(2, 23, COMPLETED)),
    # no waits at all: healthy, shifted, done on the next look
    (NO_WAITS, -1, 0, GreenSeen(1, healthy=True), Next(0, 1)),
    (NO_WAITS, 0, 1, GreenSeen(1, healthy=True), Next(1, 1, COMPLETED)),
])
def test_advance(policy: Policy, step: int, since: float, seen: GreenSeen, expected: Next) -> None:
    assert advance(policy, step, since, 0.0, seen) == expected


@pytest.mark.parametrize(("step", "seen", "why"), [
    (-1, GreenSeen(3, healthy=False, problem="Copy e-0 failed: bad magic"), "could not become healthy: Copy e-0"),
    (0, GreenSeen(5, healthy=True, firing=("errors",)), "errors went into ALARM while the new fleet took 25%"),
    (2, GreenSeen(5, healthy=True, firing=("errors",)), "took 100%"),
    (-1, GreenSeen(601, healthy=False), "MaximumExecutionTimeoutInSeconds (600 s)"),
])
def test_rolls_back(step: int, seen: GreenSeen, why: str) -> None:
    decided = advance(CANARY, step, 0.0, 0.0, seen)
    assert decided.outcome == ROLLED_BACK
    assert why in decided.reason


@pytest.mark.parametrize(("step", "since", "seen"), [
    (0, 3, GreenSeen(13, healthy=False)),  # the canary baked, but the new fleet is loading again (a gateway restart)
    (1, 13, GreenSeen(23, healthy=False)),
    (2, 23, GreenSeen(28, healthy=False)),  # the old fleet would stop with the new one not serving
])
def test_an_unhealthy_new_fleet_holds_the_update_where_it_is(step: int, since: float, seen: GreenSeen) -> None:
    """More traffic, or the old fleet's end, waits until every new copy has been ready again: until then the
    update holds (an alarm or the timeout still rolls it back)."""
    assert advance(CANARY, step, since, 0.0, seen) == Next(step, since)


def test_share_by_step() -> None:
    assert [share(CANARY, step) for step in (-1, 0, 1, 2)] == [0.0, 0.25, 1.0, 1.0]


def variant(name: str, count: int, weight: float) -> VariantRecord:
    return VariantRecord(name=name, instance_type="local", instance_count=count, weight=weight, model="m")


@pytest.mark.parametrize(("retain", "exclude", "expected"), [
    (False, [], [(1, 1.0), (2, 1.0)]),
    (True, [], [(3, 0.5), (2, 1.0)]),
    (True, ["DesiredWeight"], [(3, 1.0), (2, 1.0)]),
    (True, ["DesiredInstanceCount", "DesiredWeight"], [(1, 1.0), (2, 1.0)]),
])
def test_retained_variant_properties(retain: bool, exclude: list[str], expected: list[tuple[int, float]]) -> None:
    current = [variant("a", 3, 0.5)]
    new = [variant("a", 1, 1.0), variant("b", 2, 1.0)]
    request = UpdateEndpointInput(EndpointName="e", EndpointConfigName="c", RetainAllVariantProperties=retain,
                                  ExcludeRetainedVariantProperties=[{"VariantPropertyType": p} for p in exclude])
    assert [(v.instance_count, v.weight) for v in retained(current, new, request)] == expected


def test_without_a_timeout_an_update_is_not_timed_out_by_its_own_waits() -> None:
    """LINEAR at 10% baking an hour a step bakes ten hours: pier's default timeout (an hour for the new fleet to
    become healthy) counts from the end of the waits, or every such update would roll back."""
    policy = policy_of({"BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "LINEAR", "WaitIntervalInSeconds": 3600,
                                        "LinearStepSize": percent(10)},
        "TerminationWaitInSeconds": 600}}, 1)
    assert policy.timeout_s == 3600 + 10 * 3600 + 600
