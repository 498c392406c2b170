"""The scaler loop: every second it samples each scalable target's load into the metric history; every
`interval_s` it evaluates the alarms, asks each target's policies what capacity they want (decide.py), and
changes the copy or instance count through the control plane (counts.Counts), recording a scaling activity
with its cause, which it marks Successful once the copies are ready, or Failed with the reason the change was
refused (it does not fit, the endpoint is updating).

`wake()` is pier's own scale-from-zero: a request for a component at zero copies starts one at once instead
of failing until an alarm fires (docs/autoscaling.md says how that differs from AWS)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pier.autoscaling import decide, policies, schedule
from pier.autoscaling.alarms import ALARM, AlarmVerdict, evaluate
from pier.autoscaling.application_autoscaling import POLICY, SCHEDULED, TARGET, target_key
from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.cloudwatch import ALARM as ALARM_KIND
from pier.autoscaling.counts import Count, Counts, Refused
from pier.autoscaling.history import Bucket, History, MetricId, aggregate, statistic
from pier.autoscaling.recorder import Recorder
from pier.autoscaling.resource import Resource, resource_of
from pier.autoscaling.settings import ScalingSettings

log = logging.getLogger("pier.autoscaling")
SAMPLE_S = 1.0
SCHEDULE_RUNS = "scheduled-run"  # when each scheduled action last ran
Body = dict[str, Any]
Offload = Callable[[Callable[[], None]], Awaitable[None]]


@dataclass
class _Moments:
    last_scaling: float
    last_scale_out: float


class Scaler:
    def __init__(self, store: Store, history: History, recorder: Recorder, counts: Counts,
                 settings: ScalingSettings, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.history = history
        self.recorder = recorder
        self.counts = counts
        self.settings = settings
        self.clock = clock
        self._moments: dict[str, _Moments] = {}
        self._open: dict[str, tuple[Body, int]] = {}  # activity id -> (activity still InProgress, count it set)
        self._wake = asyncio.Event()
        self._next_decision = 0.0
        self._lock = threading.RLock()  # a tick (on the writer thread) and a wake (on the loop) take turns

    def poke(self) -> None:
        """Evaluate now (a target, policy or alarm changed)."""
        self._next_decision = 0.0
        self._wake.set()

    async def run(self, offload: Offload | None = None) -> None:
        """Tick until cancelled; `offload` runs each tick off the event loop (the gateway's writer thread), since a
        tick reads and writes SQLite."""
        while True:
            self._wake.clear()
            try:
                if offload is None:
                    self.tick()
                else:
                    await offload(self.tick)
            except Exception:
                log.exception("autoscaling tick failed; trying again")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(SAMPLE_S, self.settings.interval_s))

    def tick(self) -> None:
        with self._lock:
            self._tick()

    def _tick(self) -> None:
        now = self.clock()
        targets = [(t, resource_of(t["ResourceId"], t["ScalableDimension"])) for t in self.store.all(TARGET)]
        counts: dict[str, Count] = {}
        for _, resource in targets:
            count = self.counts.count(resource)
            if count is not None:
                counts[resource.resource_id] = count
                load = max(self.counts.load(resource), self.recorder.busy(resource.workload, now))
                self.recorder.sample(resource, load, count.desired, count.ready)
                used = self.counts.usage(resource)
                if used is not None:
                    self.recorder.utilization(resource, used)
        self.history.flush()
        self._settle(counts, now)
        if now < self._next_decision:
            return
        self._next_decision = now + self.settings.interval_s
        self._run_schedules(now)
        targets = [(t, resource_of(t["ResourceId"], t["ScalableDimension"])) for t in self.store.all(TARGET)]
        alarmed = self._evaluate_alarms(now)
        for target, resource in targets:
            count = counts.get(resource.resource_id)
            if count is not None:
                self._decide(target, resource, count, alarmed, now)

    # ---- pier's own wake-up

    def scaled(self, resource: Resource) -> bool:
        return self.store.get(TARGET, target_key(resource)) is not None

    def wake(self, resource: Resource) -> bool:
        """Start a copy of a component at zero copies now (a request is waiting); False when it has no scalable
        target, or the target keeps it at zero."""
        with self._lock:
            return self._wake_one(resource)

    def _wake_one(self, resource: Resource) -> bool:
        target = self.store.get(TARGET, target_key(resource))
        if target is None or not self.settings.wake or target["MaxCapacity"] < 1:
            return False
        count = self.counts.count(resource)
        if count is None:
            return False
        if count.desired > 0:
            return True
        wanted = max(1, int(target["MinCapacity"]))
        self._apply(target, resource, count, decide.Ask(
            wanted, f"a request arrived for {resource.workload}, which had no copies: pier starts one at once "
                    "(AWS waits for an alarm on NoCapacityInvocationFailures)"), self.clock())
        return True

    # ---- decisions

    def _decide(self, target: Body, resource: Resource, count: Count, alarmed: dict[str, tuple[AlarmVerdict, float]],
                now: float) -> None:
        bounds = decide.Bounds(int(target["MinCapacity"]), int(target["MaxCapacity"]))
        moments = self._moments_of(target, resource)
        seen = decide.Observation(count.desired, count.ready, now, moments.last_scaling, moments.last_scale_out)
        asks: list[decide.Ask | None] = []
        for policy in self.store.all(POLICY):
            if policy["ResourceId"] != resource.resource_id:
                continue
            if policy["PolicyType"] == "TargetTrackingScaling":
                asks.append(self._track(policy, resource, seen, bounds))
            else:
                found = alarmed.get(policy["PolicyARN"])
                if found is not None and found[0].newest is not None:
                    verdict, threshold = found
                    stepping = policies.stepping(policy["StepScalingPolicyConfiguration"])
                    assert verdict.newest is not None
                    asks.append(decide.step(stepping, seen, verdict.newest - threshold, bounds,
                                            f"step scaling policy {policy['PolicyName']} (its alarm: "
                                            f"{verdict.reason})"))
        suspended = target.get("SuspendedState", {})
        out_held = bool(suspended.get("DynamicScalingOutSuspended"))
        in_held = bool(suspended.get("DynamicScalingInSuspended"))
        asks = [a for a in asks if a is None or not ((a.count > count.desired and out_held)
                                                     or (a.count < count.desired and in_held))]
        chosen = decide.choose(count.desired, asks, bounds)
        if chosen is not None and chosen.count != count.desired:
            self._apply(target, resource, count, chosen, now)

    def _track(self, policy: Body, resource: Resource, seen: decide.Observation,
               bounds: decide.Bounds) -> decide.Ask | None:
        config = policy["TargetTrackingScalingPolicyConfiguration"]
        followed = policies.followed(config, resource)
        tracking = policies.tracking(config)
        window = self.settings.high_resolution_window_s if followed.high_resolution else self.settings.window_s
        metric = MetricId.of(followed.namespace, followed.name, followed.dims)
        scale = 60.0 / window if followed.per_minute else 1.0
        now_bucket = self.history.window(metric, window, seen.now)
        value = _value(now_bucket, followed.statistic, scale, followed.missing_is_zero)
        span = max(tracking.scale_in_cooldown_s, window)
        buckets = aggregate(self.history.seconds(metric, seen.now - span, seen.now + 1), seen.now - span,
                            seen.now + 1, int(max(window, 1)))
        values = [statistic(b, followed.statistic) * scale for b in buckets]
        peak = max(values) if values else (0.0 if followed.missing_is_zero else None)
        label = f"target tracking policy {policy['PolicyName']}: {followed.name}"
        return decide.track(tracking, seen, value, peak, bounds, label)

    def _apply(self, target: Body, resource: Resource, count: Count, ask: decide.Ask, now: float) -> None:
        activity: Body = {
            "ActivityId": str(uuid.uuid4()), "ServiceNamespace": "sagemaker", "ResourceId": resource.resource_id,
            "ScalableDimension": resource.dimension,
            "Description": f"Setting desired {resource.noun} count to {ask.count}.",
            "Cause": f"{ask.cause}; changing the desired {resource.noun} count from {count.desired} to "
                     f"{ask.count}",
            "StartTime": now, "StatusCode": "InProgress",
            "StatusMessage": f"Waiting for {ask.count} {resource.unit} to be ready.",
        }
        try:
            self.counts.set(resource, ask.count)
        except Refused as refused:
            activity.update(StatusCode="Failed", StatusMessage=str(refused), EndTime=now)
            log.warning("autoscaling %s to %d failed: %s", resource.resource_id, ask.count, refused)
        else:
            log.info("autoscaling %s: %d -> %d (%s)", resource.resource_id, count.desired, ask.count, ask.cause)
            moments = self._moments_of(target, resource)
            moments.last_scaling = now
            if ask.count > count.desired:
                moments.last_scale_out = now
            self._open[activity["ActivityId"]] = (activity, ask.count)
        self.store.put_activity(activity)

    def _settle(self, counts: dict[str, Count], now: float) -> None:
        """Open activities end: Successful once the ready copies match, Overridden when the count was changed by
        someone else, Failed when the control plane reports a problem."""
        for activity_id, (activity, wanted) in list(self._open.items()):
            count = counts.get(activity["ResourceId"])
            if count is None:
                activity.update(StatusCode="Failed", StatusMessage="The resource is gone.", EndTime=now)
            elif count.desired != wanted:
                activity.update(StatusCode="Overridden", StatusMessage=f"The count was changed to {count.desired}.",
                                EndTime=now)
            elif count.problem:
                activity.update(StatusCode="Failed", StatusMessage=count.problem, EndTime=now)
            elif count.ready == wanted:
                activity.update(StatusCode="Successful", StatusMessage="Successfully set the desired count; "
                                f"{wanted} ready.", EndTime=now)
            else:
                continue
            del self._open[activity_id]
            self.store.put_activity(activity)

    def _moments_of(self, target: Body, resource: Resource) -> _Moments:
        key = target_key(resource)
        moments = self._moments.get(key)
        if moments is None or moments.last_scaling < target["CreationTime"]:
            done = [a for a in self.store.activities(resource.resource_id) if a["StatusCode"] != "Failed"]
            last = max([target["CreationTime"], *(a["StartTime"] for a in done)])
            moments = _Moments(last, max([0.0, *(a["StartTime"] for a in done)]))
            self._moments[key] = moments
        return moments

    # ---- scheduled actions

    def _run_schedules(self, now: float) -> None:
        """Each scheduled action whose time has come sets its target's bounds (missed runs are not made up)."""
        for action in self.store.all(SCHEDULED):
            key = f"{action['ResourceId']}|{action['ScalableDimension']}|{action['ScheduledActionName']}"
            ran = self.store.get(SCHEDULE_RUNS, key) or {}
            start = action.get("StartTime", action["CreationTime"])
            due = schedule.next_run(action["Schedule"], action.get("Timezone"),
                                    ran.get("at", max(action["CreationTime"], start) - 1e-6), start)
            if due is None or due > now or due > action.get("EndTime", float("inf")):
                continue
            self.store.put(SCHEDULE_RUNS, key, {"at": now})
            resource = resource_of(action["ResourceId"], action["ScalableDimension"])
            target = self.store.get(TARGET, target_key(resource))
            if target is None or target.get("SuspendedState", {}).get("ScheduledScalingSuspended"):
                continue
            limits = {k: v for k, v in action.get("ScalableTargetAction", {}).items()
                      if k in ("MinCapacity", "MaxCapacity")}
            updated = {**target, **limits}
            if updated["MinCapacity"] > updated["MaxCapacity"]:
                updated["MaxCapacity" if "MinCapacity" in limits else "MinCapacity"] = updated[
                    "MinCapacity" if "MinCapacity" in limits else "MaxCapacity"]
            self.store.put(TARGET, target_key(resource), updated)
            words = " and ".join(f"{k[:3].lower()} capacity to {v}" for k, v in limits.items())
            self.store.put_activity({
                "ActivityId": str(uuid.uuid4()), "ServiceNamespace": "sagemaker", "ResourceId": resource.resource_id,
                "ScalableDimension": resource.dimension, "Description": f"Setting {words or 'nothing'}.",
                "Cause": f"scheduled action {action['ScheduledActionName']} ({action['Schedule']}) ran",
                "StartTime": now, "EndTime": now, "StatusCode": "Successful", "StatusMessage": "",
            })
            log.info("autoscaling %s: scheduled action %s set %s", resource.resource_id,
                     action["ScheduledActionName"], limits)

    # ---- alarms

    def _evaluate_alarms(self, now: float) -> dict[str, tuple[AlarmVerdict, float]]:
        """Each alarm's new state (stored when it changes); the verdicts of alarms in ALARM, by the policy ARN
        each one's actions name."""
        alarmed: dict[str, tuple[AlarmVerdict, float]] = {}
        for alarm in self.store.all(ALARM_KIND):
            period, periods = int(alarm["Period"]), int(alarm["EvaluationPeriods"])
            metric = MetricId.of(alarm["Namespace"], alarm["MetricName"],
                                 {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])})
            start = now - period * periods
            buckets = {b.ts: b for b in aggregate(self.history.seconds(metric, start, now + 1), start, now + 1,
                                                  period)}
            values = [_stat(buckets.get(int(start + i * period)), alarm["Statistic"]) for i in range(periods)]
            verdict = evaluate(alarm, values, alarm["StateValue"])
            if verdict.state != alarm["StateValue"]:
                log.info("alarm %s: %s -> %s (%s)", alarm["AlarmName"], alarm["StateValue"], verdict.state,
                         verdict.reason)
                self.store.put(ALARM_KIND, alarm["AlarmName"], {
                    **alarm, "StateValue": verdict.state, "StateReason": verdict.reason,
                    "StateUpdatedTimestamp": now})
            if verdict.state == ALARM and alarm.get("ActionsEnabled", True):
                for arn in alarm.get("AlarmActions", []):
                    alarmed[arn] = (verdict, float(alarm["Threshold"]))
        return alarmed


def _stat(bucket: Bucket | None, name: str) -> float | None:
    return None if bucket is None else statistic(bucket, name)


def _value(bucket: Bucket | None, name: str, scale: float, missing_is_zero: bool) -> float | None:
    if bucket is None:
        return 0.0 if missing_is_zero else None
    return statistic(bucket, name) * scale
