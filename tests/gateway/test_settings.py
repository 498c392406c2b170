"""`pier up` reads its environment once, into GatewaySettings, with its flags on top."""

from __future__ import annotations

import pytest

from pier.autoscaling.settings import ScalingSettings
from pier.control.backups import BackupPolicy
from pier.env import SettingsError
from pier.gateway.settings import CLUSTER_COPY_CAP, GatewaySettings


def test_every_part_comes_from_the_same_environment() -> None:
    settings = GatewaySettings.from_env({
        "PIER_QUEUE_SIZE": "4", "PIER_AUTOSCALING_INTERVAL_S": "0.5", "PIER_STATE_BACKUPS": "2",
        "PIER_CAPTURE_QUEUE_SIZE": "10", "PIER_ALLOWED_HOSTS": "a, b", "PIER_MAX_COPIES_PER_HOST": "3",
        "PIER_ASYNC_NOTIFICATION_URL": "http://relay", "PIER_GRACE_PERIOD_S": "7.5"},
        allowed_hosts=["c"], cpu_fallback=True)
    assert settings.runtime.queue == 4 and settings.scaling == ScalingSettings(interval_s=0.5)
    assert settings.backups == BackupPolicy(keep=2) and settings.capture.queue_size == 10
    assert settings.security.allowed_hosts == ("c", "a", "b")
    assert (settings.max_copies_per_host, settings.notification_relay, settings.grace_s) == (3, "http://relay", 7.5)
    assert settings.cpu_fallback
    assert GatewaySettings.from_env({"PIER_GRACE_PERIOD_S": "7.5"}, grace_period_s=2.0).grace_s == 2.0


def test_the_defaults_read_nothing() -> None:
    assert GatewaySettings.from_env({}) == GatewaySettings()


@pytest.mark.parametrize(("setting", "on_cluster", "copies"), [(3, False, 3), (3, True, 3),
                                                               (None, True, CLUSTER_COPY_CAP)])
def test_the_copy_cap(setting: int | None, on_cluster: bool, copies: int) -> None:
    assert GatewaySettings(max_copies_per_host=setting).copy_cap(on_cluster).copies == copies


@pytest.mark.parametrize("env", [{"PIER_QUEUE_SIZE": "many"}, {"PIER_MAX_COPIES_PER_HOST": "0"},
                                 {"PIER_STATE_BACKUP_MINUTES": "-1"}, {"PIER_GRACE_PERIOD_S": "soon"}])
def test_a_bad_value_is_refused_before_anything_starts(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match=next(iter(env))):
        GatewaySettings.from_env(env)
