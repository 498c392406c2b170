"""How many requests one copy takes at once, read from the environment it runs with.

One definition for both sides: the model server reads these variables (pier.server.settings) and refuses
requests past MAX_CONCURRENT_REQUESTS with 429, and its engine decodes at most PIER_PARALLEL (TGI's
MAX_BATCH_SIZE) sequences at once, the rest waiting inside that copy. The gateway never sends a copy more than
`copy_concurrency()` of its environment: further requests wait in the gateway's queue, where they go to
whichever copy frees up first instead of queueing behind one copy's engine.

The copy itself knows best: a copy serving its own inference.py takes as many as it has handler workers, which
its environment alone does not tell before it has loaded. A ready copy says so on `/ping` (`CONCURRENCY_HEADER`),
and its supervisor takes that word over the estimate from the environment.

Pure, and imports nothing of pier but its settings reader (pier.env), so the server, the backends and the
runtime may all use it.
"""

from __future__ import annotations

from collections.abc import Mapping

from pier.env import Env, SettingsError, integer

DEFAULT_MAX_CONCURRENT_REQUESTS = 128  # TGI's default
DEFAULT_PARALLEL = 8  # sequences a copy's engine decodes at once
MAX_CONCURRENT_REQUESTS = ("MAX_CONCURRENT_REQUESTS",)
PARALLEL = ("PIER_PARALLEL", "MAX_BATCH_SIZE")  # the first one set wins, as in the server's settings


def copy_concurrency(environment: Mapping[str, str]) -> int:
    """Requests a copy started with `environment` works on at once: its MAX_CONCURRENT_REQUESTS, but no more
    than its engine's parallel sequences. A value the copy would refuse to start with counts as unset (such a
    copy never becomes ready, so the number is never used)."""
    limit = _integer(environment, MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_CONCURRENT_REQUESTS)
    parallel = _integer(environment, PARALLEL, DEFAULT_PARALLEL)
    return min(limit, parallel)


def reported_concurrency(value: str | None) -> int | None:
    """A copy's own word on its concurrency (its /ping header), or None when it said nothing usable."""
    try:
        number = int((value or "").strip())
    except ValueError:
        return None
    return number if number >= 1 else None


def _integer(environment: Mapping[str, str], names: tuple[str, ...], default: int) -> int:
    """The first of `names` that is set, read as the server reads it (pier.env: surrounding blanks and JSON quotes
    ignored, at least 1); a value the copy would refuse counts as unset."""
    try:
        return Env(environment).get(*names, cast=integer(), default=default)
    except SettingsError:
        return default
