"""Drives each endpoint's blue/green update (pier.control.deployment) one reconciler tick at a time: observes the
new fleet and the update's alarms, asks `advance()` for the next step, and stores it. Completing makes the new
fleet the endpoint's (the old one then stops, draining); rolling back drops it (it stops, the old one serves on).
Either way the endpoint ends InService, with FailureReason saying why when it rolled back, as SageMaker shows it."""

from __future__ import annotations

import logging
from collections.abc import Callable

from pier.control import deployment
from pier.control.deployment import COMPLETED, ROLLED_BACK, Seen
from pier.control.records import DeploymentRecord, EndpointRecord
from pier.control.state import State

log = logging.getLogger("pier.control")

AlarmState = Callable[[str], "str | None"]  # an alarm's StateValue (OK, ALARM, INSUFFICIENT_DATA); None: no such


class Deployer:
    def __init__(self, state: State, clock: Callable[[], float], alarm_state: AlarmState | None = None) -> None:
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
                                  Seen(now, healthy, problem, firing))
        if step.outcome == COMPLETED:
            self._complete(endpoint, pending, now)
        elif step.outcome == ROLLED_BACK:
            log.warning("endpoint %s: update to %s rolled back: %s", endpoint.name, pending.config_name, step.reason)
            self.state.endpoints.put(endpoint.model_copy(update={
                "deployment": None, "status": "InService", "failure_reason": step.reason, "modified": now}))
        elif step.step != pending.step:
            log.info("endpoint %s: update to %s %s", endpoint.name, pending.config_name,
                     deployment.phase(step.step, policy))
            self.state.endpoints.put(endpoint.model_copy(update={
                "deployment": pending.model_copy(update={"step": step.step, "since": step.since}), "modified": now}))

    def _complete(self, endpoint: EndpointRecord, pending: DeploymentRecord, now: float) -> None:
        log.info("endpoint %s: update to %s completed", endpoint.name, pending.config_name)
        self.state.endpoints.put(endpoint.model_copy(update={
            "variants": pending.variants, "config_name": pending.config_name, "deployment": None,
            "data_capture": pending.data_capture, "async_inference": pending.async_inference,
            "status": "InService", "failure_reason": "", "modified": now}))
