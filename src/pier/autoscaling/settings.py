"""How often the scaler looks, and how much metric history the gateway keeps."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace


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
        env = os.environ if env is None else env
        settings = cls()
        for name, field in (("PIER_AUTOSCALING_INTERVAL_S", "interval_s"),
                            ("PIER_AUTOSCALING_WINDOW_S", "window_s"),
                            ("PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S", "high_resolution_window_s"),
                            ("PIER_METRICS_RETENTION_S", "retention_s")):
            raw = env.get(name, "").strip()
            if raw:
                settings = replace(settings, **{field: _seconds(name, raw)})  # type: ignore[arg-type]
        wake = env.get("PIER_AUTOSCALING_WAKE", "").strip().lower()
        if wake:
            if wake not in ("true", "false", "1", "0"):
                raise ValueError(f"PIER_AUTOSCALING_WAKE must be true or false; got {wake!r}.")
            settings = replace(settings, wake=wake in ("true", "1"))
        return settings


def _seconds(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise ValueError(f"{name} must be a number of seconds above 0; got {raw!r}. Fix it in the gateway's "
                         "environment.")
    return value
