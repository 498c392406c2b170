"""TGI's per-request token limits."""

from __future__ import annotations

import pytest

from pier.env import SettingsError
from pier.errors import ContextLengthExceeded, InputTooLong
from pier.server.context_limits import Limits
from pier.server.settings import ServerSettings


@pytest.mark.parametrize(
    ("settings", "n_ctx", "expected"),
    [
        (ServerSettings(), 4096, Limits(4095, 4096)),
        (ServerSettings(max_total_tokens=2048), 4096, Limits(2047, 2048)),
        (ServerSettings(max_input_tokens=1024, max_total_tokens=2048), 8192, Limits(1024, 2048)),
    ],
)
def test_resolve(settings: ServerSettings, n_ctx: int, expected: Limits) -> None:
    assert Limits.resolve(settings, n_ctx) == expected


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        (ServerSettings(max_total_tokens=8192), "raise MAX_BATCH_TOTAL_TOKENS"),
        (ServerSettings(max_input_tokens=4096, max_total_tokens=4096), "lower MAX_INPUT_TOKENS"),
    ],
)
def test_impossible_settings(settings: ServerSettings, fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        Limits.resolve(settings, 4096)


def test_checks_total_before_input_as_tgi_does() -> None:
    limits = Limits(max_input_tokens=10, max_total_tokens=20)
    limits.check(10, 10)
    with pytest.raises(ContextLengthExceeded) as total:
        limits.check(15, 10)
    assert not isinstance(total.value, InputTooLong) and total.value.limit == 20
    with pytest.raises(InputTooLong) as alone:
        limits.check(11, 1)
    assert alone.value.limit == 10 and alone.value.prompt_tokens == 11


def test_room_is_what_is_left() -> None:
    limits = Limits(max_input_tokens=10, max_total_tokens=20)
    assert limits.room(5) == 15 and limits.room(25) == 1
