"""When a scheduled action runs, pure: Application Auto Scaling's `at(yyyy-mm-ddThh:mm:ss)`,
`rate(N minutes|hours|days)` and `cron(minutes hours day-of-month month day-of-week year)` expressions, in the
action's Timezone (UTC by default)."""

from __future__ import annotations

import datetime as dt
import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pier.autoscaling.errors import ScalingValidation

UNITS = {"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
DAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
MONTHS = {m: i + 1 for i, m in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT",
                                           "NOV", "DEC"))}
SEARCH_DAYS = 366 * 5  # a cron expression that matches nothing this far ahead never runs
_EXPRESSION = re.compile(r"^(at|rate|cron)\((.+)\)$")


def zone(name: str | None) -> dt.tzinfo:
    try:
        return ZoneInfo(name) if name else dt.UTC
    except (ZoneInfoNotFoundError, ValueError):
        raise ScalingValidation(f"Unknown Timezone {name!r}: use an IANA name such as Europe/Paris.") from None


def check(expression: str, timezone: str | None) -> None:
    """Refuse an expression pier cannot run, with how to write it."""
    next_run(expression, timezone, 0.0)


def next_run(expression: str, timezone: str | None, after: float, start: float | None = None) -> float | None:
    """The first run strictly after `after` (epoch seconds), or None when there is none."""
    found = _EXPRESSION.match(expression.strip())
    if found is None:
        raise ScalingValidation(f"Schedule {expression!r} is not at(...), rate(...) or cron(...).")
    kind, body = found.groups()
    tz = zone(timezone)
    if kind == "at":
        try:
            when = dt.datetime.fromisoformat(body).replace(tzinfo=tz).timestamp()
        except ValueError:
            raise ScalingValidation(f"at({body}) is not yyyy-mm-ddThh:mm:ss.") from None
        return when if when > after else None
    if kind == "rate":
        number, _, unit = body.strip().partition(" ")
        if not number.isdigit() or int(number) < 1 or unit not in UNITS:
            raise ScalingValidation(f"rate({body}) is not rate(N minutes|hours|days) with N 1 or more.")
        period = int(number) * UNITS[unit]
        origin = start if start is not None else 0.0
        steps = max(0, int((after - origin) // period) + 1)
        return origin + steps * period
    return _cron(body, tz, after)


def _cron(body: str, tz: dt.tzinfo, after: float) -> float | None:
    fields = body.split()
    if len(fields) != 6:
        raise ScalingValidation(f"cron({body}) needs six fields: minutes hours day-of-month month day-of-week year.")
    minutes, hours = _values(fields[0], 0, 59, {}), _values(fields[1], 0, 23, {})
    days, months = _values(fields[2], 1, 31, {}), _values(fields[3], 1, 12, MONTHS)
    weekdays = _values(fields[4], 1, 7, DAYS)
    years = _values(fields[5], 1970, 2199, {})
    if fields[2] != "?" and fields[4] != "?":
        raise ScalingValidation(f"cron({body}): one of day-of-month and day-of-week must be '?'.")
    moment = dt.datetime.fromtimestamp(after, tz).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    day = moment.date()
    for _ in range(SEARCH_DAYS):
        weekday = day.isoweekday() % 7 + 1  # SUN = 1 ... SAT = 7
        if (day.year in years and day.month in months
                and (fields[2] == "?" or day.day in days) and (fields[4] == "?" or weekday in weekdays)):
            for hour in sorted(hours):
                for minute in sorted(minutes):
                    candidate = dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
                    if candidate >= moment:
                        return candidate.timestamp()
        day += dt.timedelta(days=1)
    return None


def _values(field: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    if field in ("*", "?"):
        return set(range(low, high + 1))
    found: set[int] = set()
    for part in field.split(","):
        spread, _, step = part.partition("/")
        first, _, last = spread.partition("-")
        try:
            begin = low if first == "*" else _number(first, names)
            end = (high if first == "*" or step else begin) if not last else _number(last, names)
            stride = int(step) if step else 1
        except ValueError:
            raise ScalingValidation(f"cron field {field!r} is not a number, a range, a list or a step.") from None
        if not low <= begin <= end <= high or stride < 1:
            raise ScalingValidation(f"cron field {field!r} is outside {low}-{high}.")
        found.update(range(begin, end + 1, stride))
    return found


def _number(text: str, names: dict[str, int]) -> int:
    return names[text.upper()] if text.upper() in names else int(text)
