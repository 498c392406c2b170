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


def test_a_prompt_that_fills_the_context_alone_is_told_to_shrink_not_max_tokens() -> None:
    """OpenAI's first sentence stays (clients match on it); the advice is the one that can work: no max_tokens
    fits a prompt that leaves no room, so "max_tokens <= 0" would send the user after the wrong value."""
    with pytest.raises(ContextLengthExceeded) as raised:
        Limits(max_input_tokens=10, max_total_tokens=20).check(25, 1)
    message = raised.value.message
    assert message.startswith("This model's maximum context length is 20 tokens. However, you requested 26 tokens")
    assert "max_tokens <=" not in message and "Shorten the prompt to at most 10 tokens" in message
    with pytest.raises(ContextLengthExceeded) as fits:
        Limits(max_input_tokens=10, max_total_tokens=20).check(8, 15)
    assert "(max_tokens <= 12 for this prompt)" in fits.value.message
