"""The one settings reader: the first name set wins, blanks are unset, casts refuse with what to give."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pier.env import Env, SettingsError, boolean, boolean_or_auto, choice, integer, listed, number, path
from pier.errors import PierError


@pytest.mark.parametrize(("values", "cast", "default", "expected"), [
    ({}, integer(), 7, 7),
    ({"A": "  "}, integer(), 7, 7),  # blanks are unset
    ({"A": " 3 "}, integer(), None, 3),
    ({"A": '"3"'}, integer(), None, 3),  # the sagemaker SDK's json.dumps()
    ({"A": "0"}, integer(low=0), None, 0),
    ({"A": "2.5"}, number(), None, 2.5),
    ({"A": "Yes"}, boolean, False, True),
    ({"A": "off"}, boolean, True, False),
    ({"A": "auto"}, boolean_or_auto, True, None),
    ({"A": "Q8_0"}, choice("f16", "q8_0"), "f16", "q8_0"),
    ({"A": "a, b,,c "}, listed, (), ("a", "b", "c")),
    ({"A": "~/x"}, path, None, Path("~/x").expanduser()),
])
def test_casts(values: dict[str, str], cast: Any, default: Any, expected: Any) -> None:
    assert Env(values).get("A", cast=cast, default=default) == expected


def test_the_first_name_set_wins() -> None:
    env = Env({"B": "2", "C": "3"})
    assert env.get("A", "B", "C", cast=integer()) == 2 and env.text("A") is None


@pytest.mark.parametrize(("raw", "cast", "words"), [
    ("lots", integer(), "A must be an integer; got 'lots'. Fix it in the environment."),
    ("0", integer(), "A must be at least 1; got '0'"),
    ("70000", integer(high=65535), "A must be between 1 and 65535"),
    ("0", number(above=0), "A must be a number of seconds above 0"),
    ("maybe", boolean, "A must be true or false"),
    ("q5", choice("f16", "q8_0"), "A must be one of f16, q8_0; got 'q5'"),
])
def test_a_refused_value_names_the_variable_and_what_to_give(raw: str, cast: Any, words: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Env({"A": raw}).get("A", cast=cast)
    assert words in str(raised.value)
    assert isinstance(raised.value, PierError) and isinstance(raised.value, ValueError)


def test_a_message_of_its_own_and_where_to_fix_it() -> None:
    with pytest.raises(SettingsError, match=r"^A='x' is no good$"):
        Env({"A": "x"}).get("A", cast=integer(), problem="{name}={raw!r} is no good")
    with pytest.raises(SettingsError, match="Fix it in the gateway's environment"):
        Env({"A": "x"}, "the gateway's environment").get("A", cast=integer())
