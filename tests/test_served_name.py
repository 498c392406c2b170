"""The `model` an OpenAI answer carries, and the name GET /v1/models lists."""

from __future__ import annotations

import pytest

from pier.channel.headers import MODEL_NAME_HEADER
from pier.served_name import answered_name, listed_name

GATEWAY = {MODEL_NAME_HEADER: "gen"}


@pytest.mark.parametrize(("requested", "headers", "expected"), [
    ("gen", {}, "gen"),  # the client's own name, as llama-server echoes it
    ("gen/chat", GATEWAY, "gen/chat"),  # what the client asked for wins over the gateway's name
    (None, GATEWAY, "gen"),  # a body that names no model: the gateway's name for the target
    ("", GATEWAY, "gen"),
    (None, {}, "pier-random-test"),  # no gateway: the copy's own name
])
def test_answered_name(requested: str | None, headers: dict[str, str], expected: str) -> None:
    assert answered_name(requested, headers, "pier-random-test") == expected


@pytest.mark.parametrize(("headers", "expected"), [(GATEWAY, "gen"), ({}, "pier-random-test")])
def test_listed_name(headers: dict[str, str], expected: str) -> None:
    assert listed_name(headers, "pier-random-test") == expected
