"""Alarm evaluation, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from pier.autoscaling.alarms import ALARM, INSUFFICIENT, OK, evaluate

ALARM_SPEC = {"Threshold": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "EvaluationPeriods": 3}


@pytest.mark.parametrize(("change", "values", "current", "state"), [
    ({}, [1.0, 2.0, 1.0], OK, ALARM),
    ({}, [1.0, 0.0, 1.0], ALARM, OK),  # all three needed by default
    ({"DatapointsToAlarm": 2}, [1.0, 0.0, 1.0], OK, ALARM),
    ({"DatapointsToAlarm": 1}, [None, None, 1.0], OK, ALARM),  # missing periods left out
    ({}, [None, None, None], ALARM, INSUFFICIENT),
    ({"TreatMissingData": "ignore"}, [None, None, None], ALARM, ALARM),
    ({"TreatMissingData": "breaching"}, [None, None, None], OK, ALARM),
    ({"TreatMissingData": "notBreaching"}, [None, None, 1.0], ALARM, OK),
    ({"ComparisonOperator": "LessThanThreshold"}, [0.0, 0.5, 0.9], OK, ALARM),
])
def test_evaluate(change: dict[str, Any], values: list[float | None], current: str, state: str) -> None:
    verdict = evaluate({**ALARM_SPEC, **change}, values, current)
    assert verdict.state == state
    assert verdict.newest == next((v for v in reversed(values) if v is not None), None)
