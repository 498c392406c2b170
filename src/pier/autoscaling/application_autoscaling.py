"""Application Auto Scaling's operations for SageMaker resources, as boto3's `application-autoscaling` client
calls them: scalable targets, scaling policies (target tracking and step scaling) and scaling activities.
Requests arrive checked against botocore's model (wire.check); this adds what the model cannot say."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from pier.autoscaling import paging, schedule
from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.counts import Counts
from pier.autoscaling.errors import ObjectNotFound, ScalingValidation, UnknownOperation
from pier.autoscaling.policies import check_policy
from pier.autoscaling.resource import NAMESPACE, Resource, check_namespace, resource_of
from pier.autoscaling.wire import epoch

Body = dict[str, Any]
TARGET, POLICY, SCHEDULED = "target", "policy", "scheduled"
ACCOUNT = "000000000000"
SUSPENDED = ("DynamicScalingInSuspended", "DynamicScalingOutSuspended", "ScheduledScalingSuspended")
PAGE = 50  # DescribeScalableTargets, DescribeScalingActivities, DescribeScheduledActions: 1 to 50, 50 by default
POLICY_PAGE = 10  # DescribeScalingPolicies: 1 to 10, 10 by default


class ApplicationAutoScaling:
    def __init__(self, store: Store, counts: Counts, *, clock: Callable[[], float] = time.time,
                 changed: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.counts = counts
        self.clock = clock
        self.changed = changed  # the scaler looks again at once
        self.operations: dict[str, Callable[[Body, str], Body]] = {
            "RegisterScalableTarget": self.register_scalable_target,
            "DescribeScalableTargets": self.describe_scalable_targets,
            "DeregisterScalableTarget": self.deregister_scalable_target,
            "PutScalingPolicy": self.put_scaling_policy,
            "DescribeScalingPolicies": self.describe_scaling_policies,
            "DeleteScalingPolicy": self.delete_scaling_policy,
            "DescribeScalingActivities": self.describe_scaling_activities,
            "PutScheduledAction": self.put_scheduled_action,
            "DescribeScheduledActions": self.describe_scheduled_actions,
            "DeleteScheduledAction": self.delete_scheduled_action,
        }

    def call(self, operation: str, body: Body, region: str) -> Body:
        handler = self.operations.get(operation)
        if handler is None:
            raise UnknownOperation(f"pier does not serve AnyScaleFrontendService.{operation}; it serves "
                                   f"{', '.join(sorted(self.operations))}.")
        with self.store.transaction():
            reply = handler(body, region)
        self.changed()
        return reply

    # ---- scalable targets

    def register_scalable_target(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        key = target_key(resource)
        found = self.store.get(TARGET, key)
        if found is None:
            problem = self.counts.missing(resource)
            if problem:
                raise ScalingValidation(problem)
            if "MinCapacity" not in body or "MaxCapacity" not in body:
                raise ScalingValidation("MinCapacity and MaxCapacity are required to register a new scalable target.")
            found = {
                "ServiceNamespace": NAMESPACE, "ResourceId": resource.resource_id,
                "ScalableDimension": resource.dimension,
                "ScalableTargetARN": f"arn:aws:application-autoscaling:{region}:{ACCOUNT}:scalable-target/"
                                     f"{uuid.uuid4().hex[:28]}",
                "RoleARN": f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/sagemaker.application-autoscaling."
                           "amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
                "CreationTime": self.clock(),
                "SuspendedState": {key: False for key in SUSPENDED},
            }
        given: Body = {k: body[k] for k in ("MinCapacity", "MaxCapacity", "RoleARN") if k in body}
        target: Body = {**found, **given}
        target["SuspendedState"] = {**found["SuspendedState"], **body.get("SuspendedState", {})}
        _check_bounds(resource, target["MinCapacity"], target["MaxCapacity"], self.counts.floor(resource))
        self.store.put(TARGET, key, target)
        return {"ScalableTargetARN": target["ScalableTargetARN"]}

    def describe_scalable_targets(self, body: Body, region: str) -> Body:
        check_namespace(body["ServiceNamespace"])
        wanted = set(body.get("ResourceIds") or [])
        rows = [([seq], t) for seq, t in self.store.numbered(TARGET)
                if (not wanted or t["ResourceId"] in wanted)
                and body.get("ScalableDimension", t["ScalableDimension"]) == t["ScalableDimension"]]
        return _page(body, "ScalableTargets", rows, PAGE)

    def deregister_scalable_target(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        if not self.store.delete(TARGET, target_key(resource)):
            raise no_target(resource)
        for policy in self.store.all(POLICY):
            if policy["ResourceId"] == resource.resource_id:
                self.store.delete(POLICY, policy_key(resource, policy["PolicyName"]))
        for action in self.store.all(SCHEDULED):
            if action["ResourceId"] == resource.resource_id:
                self.store.delete(SCHEDULED, policy_key(resource, action["ScheduledActionName"]))
        return {}

    # ---- scaling policies

    def put_scaling_policy(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        if self.store.get(TARGET, target_key(resource)) is None:
            raise no_target(resource)
        kind = body.get("PolicyType", "StepScaling")
        check_policy(kind, body, resource)
        key = policy_key(resource, body["PolicyName"])
        found = self.store.get(POLICY, key)
        arn = found["PolicyARN"] if found else (
            f"arn:aws:autoscaling:{region}:{ACCOUNT}:scalingPolicy:{uuid.uuid4()}:resource/sagemaker/"
            f"{resource.resource_id}:policyName/{body['PolicyName']}")
        policy = {
            "PolicyARN": arn, "PolicyName": body["PolicyName"], "ServiceNamespace": NAMESPACE,
            "ResourceId": resource.resource_id, "ScalableDimension": resource.dimension, "PolicyType": kind,
            "Alarms": [], "CreationTime": found["CreationTime"] if found else self.clock(),
        }
        config = ("TargetTrackingScalingPolicyConfiguration" if kind == "TargetTrackingScaling"
                  else "StepScalingPolicyConfiguration")
        policy[config] = body[config]
        self.store.put(POLICY, key, policy)
        return {"PolicyARN": arn, "Alarms": []}

    def describe_scaling_policies(self, body: Body, region: str) -> Body:
        check_namespace(body["ServiceNamespace"])
        names = set(body.get("PolicyNames") or [])
        rows = [([seq], p) for seq, p in self.store.numbered(POLICY)
                if (not names or p["PolicyName"] in names)
                and body.get("ResourceId", p["ResourceId"]) == p["ResourceId"]
                and body.get("ScalableDimension", p["ScalableDimension"]) == p["ScalableDimension"]]
        return _page(body, "ScalingPolicies", rows, POLICY_PAGE)

    def delete_scaling_policy(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        if not self.store.delete(POLICY, policy_key(resource, body["PolicyName"])):
            raise ObjectNotFound(f"No scaling policy found for service namespace: sagemaker, resource ID: "
                                 f"{resource.resource_id}, scalable dimension: {resource.dimension}, policy name: "
                                 f"{body['PolicyName']}. DescribeScalingPolicies lists the policies.")
        return {}

    # ---- scheduled actions

    def put_scheduled_action(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        if self.store.get(TARGET, target_key(resource)) is None:
            raise no_target(resource)
        key = policy_key(resource, body["ScheduledActionName"])
        found = self.store.get(SCHEDULED, key) or {}
        action: Body = {**found, **{k: body[k] for k in ("Schedule", "Timezone", "StartTime", "EndTime",
                                                         "ScalableTargetAction") if k in body}}
        if "Schedule" not in action:
            raise ScalingValidation("Schedule is required for a new scheduled action: at(...), rate(...) or "
                                    "cron(...).")
        schedule.check(action["Schedule"], action.get("Timezone"))
        if "StartTime" in action and "EndTime" in action and epoch(action["StartTime"]) >= epoch(action["EndTime"]):
            raise ScalingValidation("StartTime must be before EndTime: the scheduled action runs only between them.")
        limits = action.get("ScalableTargetAction", {})
        if "MinCapacity" in limits and "MaxCapacity" in limits:
            _check_bounds(resource, limits["MinCapacity"], limits["MaxCapacity"], self.counts.floor(resource))
        action.update({
            "ScheduledActionName": body["ScheduledActionName"], "ServiceNamespace": NAMESPACE,
            "ResourceId": resource.resource_id, "ScalableDimension": resource.dimension,
            "ScheduledActionARN": found.get("ScheduledActionARN") or (
                f"arn:aws:autoscaling:{region}:{ACCOUNT}:scheduledAction:{uuid.uuid4()}:resource/sagemaker/"
                f"{resource.resource_id}:scheduledActionName/{body['ScheduledActionName']}"),
            "CreationTime": found.get("CreationTime", self.clock()),
        })
        self.store.put(SCHEDULED, key, action)
        return {}

    def describe_scheduled_actions(self, body: Body, region: str) -> Body:
        check_namespace(body["ServiceNamespace"])
        names = set(body.get("ScheduledActionNames") or [])
        rows = [([seq], a) for seq, a in self.store.numbered(SCHEDULED)
                if (not names or a["ScheduledActionName"] in names)
                and body.get("ResourceId", a["ResourceId"]) == a["ResourceId"]
                and body.get("ScalableDimension", a["ScalableDimension"]) == a["ScalableDimension"]]
        return _page(body, "ScheduledActions", rows, PAGE)

    def delete_scheduled_action(self, body: Body, region: str) -> Body:
        resource = self._resource(body)
        if not self.store.delete(SCHEDULED, policy_key(resource, body["ScheduledActionName"])):
            raise ObjectNotFound(f"No scheduled action {body['ScheduledActionName']} for {resource.resource_id}; "
                                 "DescribeScheduledActions lists them.")
        return {}

    # ---- activities

    def describe_scaling_activities(self, body: Body, region: str) -> Body:
        check_namespace(body["ServiceNamespace"])
        rows = [([-seq], a) for seq, a in self.store.numbered_activities(body.get("ResourceId"))
                if body.get("ScalableDimension", a["ScalableDimension"]) == a["ScalableDimension"]]
        return _page(body, "ScalingActivities", rows, PAGE)

    def _resource(self, body: Body) -> Resource:
        check_namespace(body["ServiceNamespace"])
        return resource_of(body["ResourceId"], body["ScalableDimension"])


def target_key(resource: Resource) -> str:
    return f"{resource.resource_id}|{resource.dimension}"


def policy_key(resource: Resource, name: str) -> str:
    return f"{target_key(resource)}|{name}"


def no_target(resource: Resource) -> ObjectNotFound:
    return ObjectNotFound(
        f"No scalable target registered for service namespace: sagemaker, resource ID: {resource.resource_id}, "
        f"scalable dimension: {resource.dimension}. Register it first with RegisterScalableTarget.")


def _check_bounds(resource: Resource, low: int, high: int, floor: int) -> None:
    if low > high:
        raise ScalingValidation(f"MinCapacity ({low}) must not be greater than MaxCapacity ({high}).")
    if low < floor:
        raise ScalingValidation(
            f"MinCapacity must be at least {floor} for {resource.resource_id}: a variant keeps at least one "
            "instance; inference components and the variants of asynchronous endpoints may scale to zero.")


def _page(body: Body, key: str, rows: list[tuple[paging.Place, Body]], most: int) -> Body:
    """MaxResults (1 to `most`, `most` when not given, as AWS pages each operation) and NextToken over `rows`."""
    size = paging.size_of(body, "MaxResults", most, most, ScalingValidation)
    return paging.page(rows, key, size, body.get("NextToken"), ScalingValidation)
