"""Scaling policies as stored (PutScalingPolicy's shape): which checks a policy must pass, the metric a
target-tracking policy follows, and the pure decision inputs (`decide.Tracking`, `decide.Stepping`) it makes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from pier.autoscaling.decide import StepAdjustment, Stepping, Tracking
from pier.autoscaling.errors import ScalingValidation
from pier.autoscaling.resource import Resource

NAMESPACE = "AWS/SageMaker"
ADJUSTMENT_TYPES = ("ChangeInCapacity", "ExactCapacity", "PercentChangeInCapacity")


@dataclass(frozen=True)
class Followed:
    """The metric a target-tracking policy keeps near its target."""

    namespace: str
    name: str
    dims: dict[str, str]
    statistic: str
    high_resolution: bool  # read over the short window, as the metric is
    per_minute: bool  # a Sum read over the window is scaled to a minute (AWS's per-minute invocation metrics)
    missing_is_zero: bool  # no datapoints means no invocations (pier records none then)


# PredefinedMetricType -> (metric, statistic, high resolution, per minute, for components or for variants)
PREDEFINED: dict[str, tuple[str, str, bool, bool, bool]] = {
    "SageMakerVariantInvocationsPerInstance": ("InvocationsPerInstance", "Sum", False, True, False),
    "SageMakerInferenceComponentInvocationsPerCopy": ("InvocationsPerCopy", "Sum", False, True, True),
    "SageMakerInferenceComponentConcurrentRequestsPerCopyHighResolution":
        ("ConcurrentRequestsPerCopy", "Average", True, False, True),
    "SageMakerVariantConcurrentRequestsPerModelHighResolution":
        ("ConcurrentRequestsPerModel", "Average", True, False, False),
}


def check_policy(kind: str, body: dict[str, Any], resource: Resource) -> None:
    if kind == "TargetTrackingScaling":
        config = body.get("TargetTrackingScalingPolicyConfiguration")
        if config is None:
            raise ScalingValidation("TargetTrackingScalingPolicyConfiguration is required for a TargetTrackingScaling "
                                    "policy.")
        if config["TargetValue"] <= 0:
            raise ScalingValidation(f"TargetValue must be greater than 0; got {config['TargetValue']}.")
        if "PredefinedMetricSpecification" in config and "CustomizedMetricSpecification" in config:
            # the scaler would follow the predefined one and silently ignore the other
            raise ScalingValidation("Give PredefinedMetricSpecification or CustomizedMetricSpecification, not both: a "
                                    "target tracking policy follows one metric (put a second policy for another).")
        followed(config, resource)
    elif kind == "StepScaling":
        config = body.get("StepScalingPolicyConfiguration")
        if config is None or not config.get("StepAdjustments"):
            raise ScalingValidation("StepScalingPolicyConfiguration with at least one StepAdjustments entry is "
                                    "required for a StepScaling policy.")
        check_stepping(config)
    else:
        raise ScalingValidation(f"pier serves TargetTrackingScaling and StepScaling policies, not {kind}.")


def check_stepping(config: dict[str, Any]) -> None:
    """AWS's rules for a step policy, which decide.step relies on: a known AdjustmentType, and step intervals
    that cover the metric without gap or overlap (else a breach matches no step, or two)."""
    kind = config.get("AdjustmentType")
    if kind not in ADJUSTMENT_TYPES:
        raise ScalingValidation(f"StepScalingPolicyConfiguration.AdjustmentType must be one of "
                                f"{', '.join(ADJUSTMENT_TYPES)}; got {kind!r}.")
    if config.get("MinAdjustmentMagnitude") is not None and kind != "PercentChangeInCapacity":
        raise ScalingValidation("MinAdjustmentMagnitude is only for AdjustmentType PercentChangeInCapacity.")
    steps = sorted(stepping(config).steps, key=lambda s: -math.inf if s.lower is None else s.lower)
    if kind == "ExactCapacity" and any(s.adjustment < 0 for s in steps):
        raise ScalingValidation("With ExactCapacity, each ScalingAdjustment is a capacity: 0 or more.")
    for found in steps:
        if found.lower is None and found.upper is None:
            raise ScalingValidation("A step adjustment needs MetricIntervalLowerBound, MetricIntervalUpperBound or "
                                    "both; they cannot both be null.")
        if found.lower is not None and found.upper is not None and found.lower >= found.upper:
            raise ScalingValidation(f"A step adjustment's MetricIntervalLowerBound ({found.lower:g}) must be less "
                                    f"than its MetricIntervalUpperBound ({found.upper:g}).")
    for before, after in itertools.pairwise(steps):
        if before.upper is None or after.lower is None or before.upper != after.lower:
            raise ScalingValidation("Step adjustments' intervals must not overlap or leave a gap: each step's "
                                    "MetricIntervalUpperBound is the next one's MetricIntervalLowerBound (got "
                                    f"{_interval(before)} then {_interval(after)}).")


def _interval(found: StepAdjustment) -> str:
    low = "-inf" if found.lower is None else f"{found.lower:g}"
    high = "+inf" if found.upper is None else f"{found.upper:g}"
    return f"[{low}, {high})"


def followed(config: dict[str, Any], resource: Resource) -> Followed:
    predefined = config.get("PredefinedMetricSpecification")
    custom = config.get("CustomizedMetricSpecification")
    if predefined is not None:
        kind = predefined["PredefinedMetricType"]
        if kind not in PREDEFINED:
            raise ScalingValidation(f"pier follows the predefined metrics {', '.join(PREDEFINED)}; not {kind}.")
        name, statistic, high, per_minute, for_components = PREDEFINED[kind]
        if for_components != (resource.component is not None):
            raise ScalingValidation(f"{kind} is for {'inference components' if for_components else 'variants'}; "
                                    f"{resource.resource_id} is not one.")
        return Followed(NAMESPACE, name, resource.dimensions, statistic, high, per_minute, per_minute)
    if custom is not None:
        if "MetricName" not in custom or "Namespace" not in custom or "Statistic" not in custom:
            raise ScalingValidation("pier's CustomizedMetricSpecification takes MetricName, Namespace, Dimensions and "
                                    "Statistic (metric math in Metrics is not served).")
        if custom["Statistic"] not in ("Average", "Minimum", "Maximum", "SampleCount", "Sum"):
            raise ScalingValidation(f"Unknown Statistic {custom['Statistic']!r}.")
        dims = {d["Name"]: d["Value"] for d in custom.get("Dimensions", [])}
        return Followed(custom["Namespace"], custom["MetricName"], dims, custom["Statistic"], False, False, False)
    raise ScalingValidation("A target tracking policy needs PredefinedMetricSpecification or "
                            "CustomizedMetricSpecification.")


def tracking(config: dict[str, Any]) -> Tracking:
    return Tracking(float(config["TargetValue"]), float(config.get("ScaleOutCooldown", 300)),
                    float(config.get("ScaleInCooldown", 300)), bool(config.get("DisableScaleIn", False)))


def stepping(config: dict[str, Any]) -> Stepping:
    steps = tuple(StepAdjustment(s.get("MetricIntervalLowerBound"), s.get("MetricIntervalUpperBound"),
                       int(s["ScalingAdjustment"])) for s in config["StepAdjustments"])
    return Stepping(config["AdjustmentType"], steps, float(config.get("Cooldown", 0)),
                    int(config.get("MinAdjustmentMagnitude", 0)))
