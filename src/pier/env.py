"""Reading settings from a process's environment variables: one typed reader, as starlette's `Config` with `cast=`.

    env = Env()  # this process's environment (os.environ), or Env({...}) in tests
    port = env.get("SAGEMAKER_BIND_TO_PORT", cast=integer(high=65535), default=8080)
    gpus = env.get("PIER_GPUS", "SM_NUM_GPUS", cast=integer(low=0))  # the first name set wins; None when none is

A value set to blanks counts as unset. A value the cast refuses is a SettingsError that names the variable, says
what to give and where to fix it. Each process reads its settings once where it starts and passes them down: the
gateway's `GatewaySettings` (pier.gateway.settings), a copy's `ServerSettings` (pier.server.settings).
Imports nothing of pier but its errors, so every package may read through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from pier.errors import PierError

T = TypeVar("T")
Cast = Callable[[str], T]  # raises ValueError whose message says what to give, e.g. "an integer"


GATEWAY = "the gateway's environment"  # where a `pier up` setting is fixed, for its messages


class SettingsError(PierError, ValueError):
    """A setting has a value pier cannot use; the message names the variable and what to give instead."""

    code = "invalid_setting"


class Env:
    """One process's environment variables (`values`; default os.environ), read through casts. `where` ends an
    error message: where the fix goes."""

    def __init__(self, values: Mapping[str, str] | None = None, where: str = "the environment") -> None:
        self.values: Mapping[str, str] = os.environ if values is None else values
        self.where = where

    def raw(self, *names: str) -> tuple[str, str] | None:
        """The first of `names` set to more than blanks, and its value without surrounding blanks."""
        for name in names:
            value = self.values.get(name)
            if value is not None and value.strip():
                return name, value.strip()
        return None

    def has(self, *names: str) -> bool:
        return self.raw(*names) is not None

    @overload
    def get(self, *names: str, cast: Cast[T], default: T, problem: str | None = None) -> T: ...

    @overload
    def get(self, *names: str, cast: Cast[T], default: None = None, problem: str | None = None) -> T | None: ...

    def get(self, *names: str, cast: Cast[Any], default: Any = None, problem: str | None = None) -> Any:
        """The first of `names` that is set, through `cast`; `default` when none is. `problem` replaces the error
        message, formatted with the variable's `name` and `raw` value."""
        found = self.raw(*names)
        if found is None:
            return default
        name, raw = found
        try:
            return cast(raw)
        except ValueError as error:
            if problem is not None:
                raise SettingsError(problem.format(name=name, raw=raw)) from None
            raise SettingsError(f"{name} must be {error}; got {raw!r}. Fix it in {self.where}.") from None

    def text(self, *names: str) -> str | None:
        """The first of `names` that is set, without surrounding blanks (None: none is)."""
        return self.get(*names, cast=str)


# ---- casts: each raises ValueError(what to give) for a value it refuses


def _unquoted(raw: str) -> str:
    return raw.strip('"')  # the sagemaker SDK's users often json.dumps() their numbers


def integer(what: str = "an integer", *, low: int | None = 1, high: int | None = None) -> Cast[int]:
    """A whole number between `low` and `high` (None: unbounded on that side)."""
    def read(raw: str) -> int:
        try:
            number = int(_unquoted(raw))
        except ValueError:
            raise ValueError(what) from None
        _within(number, low, high)
        return number

    return read


def number(what: str = "a number of seconds", *, low: float | None = None, above: float | None = None) -> Cast[float]:
    """A number at least `low`, or above `above`."""
    def read(raw: str) -> float:
        try:
            value = float(_unquoted(raw))
        except ValueError:
            raise ValueError(what) from None
        if above is not None and not value > above:
            raise ValueError(f"{what} above {above:g}")
        _within(value, low, None)
        return value

    return read


def _within(value: float, low: float | None, high: float | None) -> None:
    if (low is not None and not value >= low) or (high is not None and value > high):
        raise ValueError(f"between {low} and {high}" if low is not None and high is not None
                         else f"at least {low}" if low is not None else f"at most {high}")


TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def boolean(raw: str) -> bool:
    """true or false (1/0, yes/no, on/off)."""
    lowered = _unquoted(raw).lower()
    if lowered in TRUE or lowered in FALSE:
        return lowered in TRUE
    raise ValueError("true or false")


def boolean_or_auto(raw: str) -> bool | None:
    """true, false, or auto (None: the library's own choice)."""
    return None if _unquoted(raw).lower() == "auto" else boolean(raw)


def choice(*choices: str) -> Cast[str]:
    """One of `choices`, in any case (read as lower case)."""
    def read(raw: str) -> str:
        lowered = _unquoted(raw).lower()
        if lowered not in choices:
            raise ValueError(f"one of {', '.join(choices)}")
        return lowered

    return read


def listed(raw: str) -> tuple[str, ...]:
    """Comma-separated names (blanks around them and empty ones ignored)."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def path(raw: str) -> Path:
    return Path(raw).expanduser()
