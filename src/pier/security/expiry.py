"""When a key expires, as `pier keys create/rotate --expires` reads it: a duration from now (`90d`, `12h`,
`30m`, `45s`) or a date and time (`2026-01-31`, `2026-01-31T18:00:00Z`; no zone means UTC)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+)\s*([smhdw])")


def expiry_time(text: str, now: float) -> float:
    """Epoch seconds; ValueError, saying what is accepted, for anything else or a time not in the future."""
    text = text.strip()
    match = _DURATION.fullmatch(text.lower())
    if match:
        when = now + int(match.group(1)) * UNITS[match.group(2)]
    else:
        try:
            parsed = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise ValueError(f"--expires {text!r} is neither a duration (90d, 12h, 30m, 45s, 2w) nor a date and "
                             "time (2026-01-31 or 2026-01-31T18:00:00Z).") from None
        when = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    if when <= now:
        raise ValueError(f"--expires {text!r} is not in the future.")
    return when


def shown(when: float | None) -> str:
    return "never" if when is None else datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
