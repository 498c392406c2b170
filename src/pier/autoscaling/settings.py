"""How often the scaler looks, and how much metric history the gateway keeps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pier.env import GATEWAY, Env, boolean, number


@dataclass(frozen=True)
class ScalingSettings:
    interval_s: float = 5.0  # the scaler evaluates policies and alarms this often (PIER_AUTOSCALING_INTERVAL_S)
    # Per-minute metrics (InvocationsPerCopy, InvocationsPerInstance, customized ones) are read over this window and
    # scaled to a minute; high-resolution ones (ConcurrentRequestsPer*HighResolution) over the shorter one.
    window_s: float = 60.0
    high_resolution_window_s: float = 10.0
    retention_s: float = 3 * 3600.0  # history older than this is dropped (PIER_METRICS_RETENTION_S)
    wake: bool = True  # a request for a component at zero copies starts one at once (PIER_AUTOSCALING_WAKE)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ScalingSettings:
        read, defaults = Env(env, GATEWAY), cls()
        seconds = number(above=0)
        return cls(
            interval_s=read.get("PIER_AUTOSCALING_INTERVAL_S", cast=seconds, default=defaults.interval_s),
            window_s=read.get("PIER_AUTOSCALING_WINDOW_S", cast=seconds, default=defaults.window_s),
            high_resolution_window_s=read.get("PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S", cast=seconds,
                                              default=defaults.high_resolution_window_s),
            retention_s=read.get("PIER_METRICS_RETENTION_S", cast=seconds, default=defaults.retention_s),
            wake=read.get("PIER_AUTOSCALING_WAKE", cast=boolean, default=defaults.wake))
