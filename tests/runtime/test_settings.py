from __future__ import annotations

import pytest

from pier.runtime.settings import RuntimeSettings


@pytest.mark.parametrize(("env", "queue", "timeout_s"), [
    ({}, RuntimeSettings().queue, RuntimeSettings().queue_timeout_s),
    ({"PIER_QUEUE_SIZE": "4"}, 4, RuntimeSettings().queue_timeout_s),
    ({"PIER_QUEUE_SIZE": " 0 ", "PIER_QUEUE_TIMEOUT_SECONDS": "2.5"}, 0, 2.5),
    ({"PIER_QUEUE_SIZE": "", "PIER_QUEUE_TIMEOUT_SECONDS": "0"}, RuntimeSettings().queue, 0.0),
])
def test_the_queue_bounds_come_from_the_environment(env: dict[str, str], queue: int, timeout_s: float) -> None:
    settings = RuntimeSettings.from_env(env)
    assert (settings.queue, settings.queue_timeout_s) == (queue, timeout_s)


@pytest.mark.parametrize("env", [{"PIER_QUEUE_SIZE": "many"}, {"PIER_QUEUE_SIZE": "-1"},
                                 {"PIER_QUEUE_TIMEOUT_SECONDS": "soon"}, {"PIER_QUEUE_SIZE": "2.5"}])
def test_a_bad_value_names_its_variable(env: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=next(iter(env))):
        RuntimeSettings.from_env(env)


@pytest.mark.parametrize(("env", "ttl_s"), [({}, 1200.0), ({"PIER_SESSION_TTL_SECONDS": "60"}, 60.0)])
def test_the_session_ttl_comes_from_the_environment(env: dict[str, str], ttl_s: float) -> None:
    assert RuntimeSettings.from_env(env).session_ttl_s == ttl_s


def test_a_bad_session_ttl_names_its_variable() -> None:
    with pytest.raises(ValueError, match="PIER_SESSION_TTL_SECONDS"):
        RuntimeSettings.from_env({"PIER_SESSION_TTL_SECONDS": "forever"})
