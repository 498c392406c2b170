"""The scaler's settings from the gateway's environment."""

from __future__ import annotations

import pytest

from pier.autoscaling.settings import ScalingSettings


@pytest.mark.parametrize(("env", "expected"), [
    ({}, ScalingSettings()),
    ({"PIER_AUTOSCALING_INTERVAL_S": "0.5", "PIER_METRICS_RETENTION_S": "600"},
     ScalingSettings(interval_s=0.5, retention_s=600.0)),
    ({"PIER_AUTOSCALING_HIGH_RESOLUTION_WINDOW_S": "2", "PIER_AUTOSCALING_WINDOW_S": "30"},
     ScalingSettings(window_s=30.0, high_resolution_window_s=2.0)),
    ({"PIER_AUTOSCALING_WAKE": "false"}, ScalingSettings(wake=False)),
])
def test_from_env(env: dict[str, str], expected: ScalingSettings) -> None:
    assert ScalingSettings.from_env(env) == expected


@pytest.mark.parametrize(("env", "words"), [
    ({"PIER_AUTOSCALING_INTERVAL_S": "0"}, "PIER_AUTOSCALING_INTERVAL_S must be a number of seconds above 0"),
    ({"PIER_METRICS_RETENTION_S": "a day"}, "PIER_METRICS_RETENTION_S must be"),
    ({"PIER_AUTOSCALING_WAKE": "maybe"}, "true or false"),
])
def test_bad_values_name_the_variable(env: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ScalingSettings.from_env(env)
