"""The gateway's Application Auto Scaling and CloudWatch: what pier.gateway.autoscaling_route answers with."""

from __future__ import annotations

from dataclasses import dataclass

from pier.autoscaling.application_autoscaling import ApplicationAutoScaling
from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.cloudwatch import CloudWatch
from pier.autoscaling.history import History
from pier.autoscaling.recorder import Recorder
from pier.autoscaling.scaler import Scaler


@dataclass
class Autoscaling:
    store: Store
    history: History
    recorder: Recorder
    scaler: Scaler
    application_autoscaling: ApplicationAutoScaling
    cloudwatch: CloudWatch
