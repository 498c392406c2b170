"""PutScalingPolicy's checks that botocore's model cannot make: step policies as AWS requires them."""

from __future__ import annotations

from typing import Any

import pytest

from pier.autoscaling.errors import ScalingValidation
from pier.autoscaling.policies import check_policy
from pier.autoscaling.resource import resource_of

IC = resource_of("inference-component/ic")


def step_policy(adjustment_type: str, *steps: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"StepScalingPolicyConfiguration": {"AdjustmentType": adjustment_type, "StepAdjustments": list(steps),
                                               **more}}


def test_awss_step_policies_pass() -> None:
    check_policy("StepScaling", step_policy("ChangeInCapacity", {"MetricIntervalLowerBound": 0,
                                                                 "ScalingAdjustment": 1}), IC)
    check_policy("StepScaling", step_policy(
        "PercentChangeInCapacity", {"MetricIntervalUpperBound": 0, "ScalingAdjustment": -10},
        {"MetricIntervalLowerBound": 5, "ScalingAdjustment": 50},
        {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 5, "ScalingAdjustment": 10},
        MinAdjustmentMagnitude=1), IC)


@pytest.mark.parametrize(("policy", "words"), [
    (step_policy("Foo", {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}), "must be one of"),
    (step_policy("ChangeInCapacity", {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 1,
                                      "ScalingAdjustment": 1},
                 {"MetricIntervalLowerBound": 5, "ScalingAdjustment": 2}), "gap"),
    (step_policy("ChangeInCapacity", {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1},
                 {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 2}), "overlap"),
    (step_policy("ChangeInCapacity", {"MetricIntervalLowerBound": 5, "MetricIntervalUpperBound": 1,
                                      "ScalingAdjustment": 1}), "must be less than"),
    (step_policy("ChangeInCapacity", {"ScalingAdjustment": 1}), "cannot both be null"),
    (step_policy("ExactCapacity", {"MetricIntervalLowerBound": 0, "ScalingAdjustment": -2}), "0 or more"),
    (step_policy("ChangeInCapacity", {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1},
                 MinAdjustmentMagnitude=2), "PercentChangeInCapacity"),
])
def test_a_step_policy_no_breach_would_pick_one_step_of_is_refused(policy: dict[str, Any], words: str) -> None:
    with pytest.raises(ScalingValidation, match=words):
        check_policy("StepScaling", policy, IC)


def test_a_target_tracking_policy_with_two_metrics_is_refused_rather_than_following_one() -> None:
    predefined = {"PredefinedMetricType": "SageMakerInferenceComponentInvocationsPerCopy"}
    config = {"TargetValue": 2, "PredefinedMetricSpecification": predefined,
              "CustomizedMetricSpecification": {"MetricName": "Q", "Namespace": "Mine", "Statistic": "Average"}}
    with pytest.raises(ScalingValidation, match="not both"):
        check_policy("TargetTrackingScaling", {"TargetTrackingScalingPolicyConfiguration": config}, IC)
