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


@pytest.mark.parametrize(("env", "deadline_s"), [
    ({}, 58.0),  # boto3's 60 s read timeout, less the margin that gets the error to it in time
    ({"PIER_INVOCATION_TIMEOUT_SECONDS": "300"}, 298.0),
    ({"PIER_INVOCATION_TIMEOUT_SECONDS": "10"}, 9.0),  # a tenth for short ones
])
def test_the_invocation_deadline_follows_the_clients_timeout(env: dict[str, str], deadline_s: float) -> None:
    assert RuntimeSettings.from_env(env).deadline_s == deadline_s


@pytest.mark.parametrize("value", ["0", "-5", "long"])
def test_a_bad_invocation_timeout_names_its_variable(value: str) -> None:
    with pytest.raises(ValueError, match="PIER_INVOCATION_TIMEOUT_SECONDS"):
        RuntimeSettings.from_env({"PIER_INVOCATION_TIMEOUT_SECONDS": value})


def test_a_bad_session_ttl_names_its_variable() -> None:
    with pytest.raises(ValueError, match="PIER_SESSION_TTL_SECONDS"):
        RuntimeSettings.from_env({"PIER_SESSION_TTL_SECONDS": "forever"})


@pytest.mark.parametrize(("env", "total_s"), [({}, None), ({"PIER_STREAM_TIMEOUT_SECONDS": "0"}, None),
                                              ({"PIER_STREAM_TIMEOUT_SECONDS": "600"}, 600.0)])
def test_a_streams_total_bound_is_the_operators_and_none_by_default(env: dict[str, str],
                                                                    total_s: float | None) -> None:
    assert RuntimeSettings.from_env(env).stream_total_s == total_s
