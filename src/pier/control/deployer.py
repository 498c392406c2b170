"""Drives each endpoint's blue/green update (pier.control.deployment) one reconciler tick at a time: observes the
new fleet and the update's alarms, asks `advance()` for the next step, and stores it. Completing makes the new
fleet the endpoint's (the old one then stops, draining); rolling back drops it (it stops, the old one serves on).
Either way the endpoint ends InService, with FailureReason saying why when it rolled back, as SageMaker shows it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pier.control import deployment, rollout
from pier.control.deployment import COMPLETED, ROLLED_BACK, GreenSeen
from pier.control.records import ComponentRecord, DeploymentRecord, EndpointRecord
from pier.control.resource_store import ResourceStore

log = logging.getLogger("pier.control")

AlarmState = Callable[[str], "str | None"]  # an alarm's StateValue (OK, ALARM, INSUFFICIENT_DATA); None: no such


class Deployer:
    def __init__(self, state: ResourceStore, clock: Callable[[], float], alarm_state: AlarmState | None = None) -> None:
        self.state = state
        self.clock = clock
        self.alarm_state: AlarmState = alarm_state or (lambda name: None)

    def drive(self, endpoint: EndpointRecord, healthy: bool, problem: str) -> None:
        """One step of `endpoint`'s update, given whether every copy of its new fleet has been ready and what
        stands in their way."""
        pending = endpoint.deployment
        assert pending is not None
        policy = deployment.policy_of(pending.config, deployment.instances(pending.variants))
        firing = tuple(name for name in policy.alarms if self.alarm_state(name) == "ALARM")
        now = self.clock()
        step = deployment.advance(policy, pending.step, pending.since, pending.started,
                                  GreenSeen(now, healthy, problem, firing))
        if step.outcome == COMPLETED:
            self._complete(endpoint, pending, now)
        elif step.outcome == ROLLED_BACK:
            log.warning("endpoint %s: update to %s rolled back: %s", endpoint.name, pending.config_name, step.reason)
            self.state.endpoints.replace(endpoint, endpoint.model_copy(update={
                "deployment": None, "status": pending.was, "failure_reason": step.reason, "modified": now}))
        elif step.step != pending.step:
            log.info("endpoint %s: update to %s %s", endpoint.name, pending.config_name,
                     deployment.phase(step.step, policy))
            self.state.endpoints.replace(endpoint, endpoint.model_copy(update={
                "deployment": pending.model_copy(update={"step": step.step, "since": step.since}), "modified": now}))

    def roll(self, component: ComponentRecord, healthy: bool, problem: str) -> None:
        """One step of `component`'s rolling update, given whether every copy it wants now has been ready and
        what stands in their way."""
        pending = component.rollout
        assert pending is not None
        policy = rollout.roll_policy(pending.config, component.copies)
        now = self.clock()
        firing = tuple(name for name in policy.alarms if self.alarm_state(name) == "ALARM")
        # Until the new model's files are here no copy runs it, however healthy the old ones are.
        fetched = component.model_dir is not None and component.weights_mb is not None
        healthy = healthy and (fetched or pending.rolling_back)
        before = rollout.state_of(pending)
        after = rollout.advance(policy, component.copies, before, pending.started,
                                rollout.Seen(now, healthy, problem, firing))
        if after.outcome == rollout.COMPLETED:
            log.info("inference component %s: rolling update completed", component.name)
            self.state.components.replace(component, component.model_copy(update={
                "rollout": None, "status": "InService", "failure_reason": "", "modified": now}))
        elif after.outcome == rollout.ROLLED_BACK:
            log.warning("inference component %s: rolling update rolled back: %s", component.name, after.reason)
            self.state.components.replace(component, component.model_copy(update={
                "specification": pending.specification, "container": pending.container,
                "model_dir": pending.model_dir, "weights_mb": pending.weights_mb, "rollout": None,
                "status": "InService", "failure_reason": after.reason, "modified": now}))
        elif after != before:
            if after.updated != before.updated:
                log.info("inference component %s: %d of %d copies on the new specification%s", component.name,
                         after.updated, component.copies, " (rolling back)" if after.rolling_back else "")
            self.state.components.replace(component, component.model_copy(update={"rollout": pending.model_copy(update={
                "updated": after.updated, "since": after.since, "baking": after.baking,
                "rolling_back": after.rolling_back, "reason": after.reason})}))

    def _complete(self, endpoint: EndpointRecord, pending: DeploymentRecord, now: float) -> None:
        log.info("endpoint %s: update to %s completed", endpoint.name, pending.config_name)
        self.state.endpoints.replace(endpoint, endpoint.model_copy(update={
            "variants": pending.variants, "config_name": pending.config_name, "deployment": None,
            "data_capture": pending.data_capture, "async_inference": pending.async_inference,
            "status": "InService", "failure_reason": "", "modified": now}))
