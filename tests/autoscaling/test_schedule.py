"""Scheduled actions' expressions, table-driven."""

from __future__ import annotations

import datetime as dt

import pytest

from pier.autoscaling.errors import ScalingValidation
from pier.autoscaling.schedule import next_run


def epoch(text: str, tz: str = "UTC") -> float:
    from zoneinfo import ZoneInfo

    return dt.datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(tz)).timestamp()


NOON = epoch("2026-11-23T12:00:00")  # a Monday


@pytest.mark.parametrize(("expression", "timezone", "after", "start", "expected"), [
    ("at(2026-11-23T12:30:00)", None, NOON, None, epoch("2026-11-23T12:30:00")),
    ("at(2026-11-23T11:30:00)", None, NOON, None, None),  # in the past: never
    ("at(2026-11-23T13:30:00)", "Europe/Paris", NOON, None, epoch("2026-11-23T12:30:00")),
    ("rate(5 minutes)", None, NOON, NOON - 60, NOON + 240),
    ("rate(1 hour)", None, NOON, NOON, NOON + 3600),  # strictly after
    ("cron(0 18 ? * MON-FRI *)", None, NOON, None, epoch("2026-11-23T18:00:00")),
    ("cron(0 8 ? * SAT *)", None, NOON, None, epoch("2026-11-28T08:00:00")),
    ("cron(*/15 * * * ? *)", None, NOON, None, NOON + 900),
    ("cron(0 0 1 JAN ? 2027)", None, NOON, None, epoch("2027-01-01T00:00:00")),
    ("cron(0 0 1 JAN ? 2025)", None, NOON, None, None),  # only in a year gone
])
def test_next_run(expression: str, timezone: str | None, after: float, start: float | None,
                  expected: float | None) -> None:
    assert next_run(expression, timezone, after, start) == expected


@pytest.mark.parametrize(("expression", "timezone", "words"), [
    ("every(5 minutes)", None, "at(...), rate(...) or cron(...)"),
    ("rate(0 minutes)", None, "N 1 or more"),
    ("rate(5 weeks)", None, "minutes|hours|days"),
    ("at(tomorrow)", None, "yyyy-mm-ddThh:mm:ss"),
    ("cron(0 18 * * MON *)", None, "must be '?'"),
    ("cron(0 25 * * ? *)", None, "outside 0-23"),
    ("cron(0 18 * *)", None, "six fields"),
    ("rate(1 hour)", "Mars/Olympus", "Unknown Timezone"),
])
def test_refused_with_how_to_write_it(expression: str, timezone: str | None, words: str) -> None:
    with pytest.raises(ScalingValidation, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
                       .replace("|", r"\|").replace("?", r"\?")):
        next_run(expression, timezone, NOON)
