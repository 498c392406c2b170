"""`--expires`: a duration from now or a UTC date and time, always in the future (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pier.security.expiry import expiry_time, shown

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "after_s"),
    [("45s", 45), ("30m", 1800), ("12h", 43200), ("90d", 90 * 86400), ("2w", 14 * 86400), (" 1D ", 86400),
     ("2025-06-02", 12 * 3600), ("2025-06-01T18:00:00Z", 6 * 3600), ("2025-06-01T18:00:00+02:00", 4 * 3600),
     ("2025-06-01T12:00:01", 1)],
)
def test_accepted(text: str, after_s: int) -> None:
    assert expiry_time(text, NOW) == NOW + after_s


@pytest.mark.parametrize(("text", "words"), [("0s", "not in the future"), ("2025-06-01", "not in the future"),
                                             ("2020-01-01T00:00:00Z", "not in the future"), ("soon", "neither"),
                                             ("10y", "neither"), ("-5m", "neither"), ("", "neither")])
def test_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        expiry_time(text, NOW)


def test_shown() -> None:
    assert shown(None) == "never"
    assert shown(NOW) == "2025-06-01 12:00:00Z"
