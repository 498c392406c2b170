"""Polling until something is true, for tests that watch a process or a reconciler change state."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(condition: Callable[[], Any], timeout: float = 90.0, what: str = "condition", interval: float = 0.2) -> Any:
    """The first truthy value of `condition()`, polled every `interval` s; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout} s")
