"""Metric alarms (PutMetricAlarm's shape) and their evaluation: `evaluate()` is pure, over the statistic of each
of the alarm's last EvaluationPeriods periods (None where a period has no data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OK, ALARM, INSUFFICIENT = "OK", "ALARM", "INSUFFICIENT_DATA"

COMPARE = {
    "GreaterThanOrEqualToThreshold": lambda value, threshold: value >= threshold,
    "GreaterThanThreshold": lambda value, threshold: value > threshold,
    "LessThanThreshold": lambda value, threshold: value < threshold,
    "LessThanOrEqualToThreshold": lambda value, threshold: value <= threshold,
}


@dataclass(frozen=True)
class AlarmVerdict:
    state: str
    reason: str
    newest: float | None  # the newest period's value, when it has one


def evaluate(alarm: dict[str, Any], values: Sequence[float | None], current: str) -> AlarmVerdict:
    """The alarm's state from its periods' values (oldest first): ALARM when DatapointsToAlarm of them breach,
    missing periods treated as TreatMissingData says (missing: left out; all missing: INSUFFICIENT_DATA)."""
    threshold = float(alarm["Threshold"])
    compare = COMPARE[alarm["ComparisonOperator"]]
    needed = int(alarm.get("DatapointsToAlarm") or alarm["EvaluationPeriods"])
    treat = alarm.get("TreatMissingData", "missing")
    newest = next((v for v in reversed(values) if v is not None), None)
    verdicts: list[bool] = []
    for value in values:
        if value is not None:
            verdicts.append(compare(value, threshold))
        elif treat == "breaching":
            verdicts.append(True)
        elif treat == "notBreaching":
            verdicts.append(False)
    if not verdicts:
        if treat == "ignore":
            return AlarmVerdict(current, "no data: the state is kept (TreatMissingData ignore)", None)
        return AlarmVerdict(INSUFFICIENT, f"no datapoints in the last {len(values)} periods", None)
    breaching = sum(verdicts)
    shown = ", ".join("-" if v is None else f"{v:g}" for v in values)
    if breaching >= needed:
        return AlarmVerdict(ALARM, f"Threshold Crossed: {breaching} of the last {len(values)} datapoints [{shown}] "
                                   f"were {alarm['ComparisonOperator']} {threshold:g}", newest)
    return AlarmVerdict(OK, f"Threshold not crossed: {breaching} of the last {len(values)} datapoints [{shown}] "
                            f"breached {threshold:g} ({needed} needed)", newest)
