"""What each path reaches (pure): whether it is open, its dialect, the endpoint it names."""

from __future__ import annotations

import pytest

from pier.dialect import Dialect
from pier.security.reach import Reach, reach_of


@pytest.mark.parametrize(
    ("path", "reach"),
    [
        ("/ping", Reach(Dialect.SAGEMAKER, open=True)),
        ("/console", Reach(Dialect.PIER, open=True)),  # the console's page and assets: it sends the key itself
        ("/console/", Reach(Dialect.PIER, open=True)),
        ("/console/assets/index-abc.js", Reach(Dialect.PIER, open=True)),
        ("/consoles", Reach(Dialect.PIER)),
        ("/", Reach(Dialect.CONTROL)),
        ("/endpoints/e1/invocations", Reach(Dialect.RUNTIME, endpoint="e1")),
        ("/endpoints/e1/invocations-response-stream", Reach(Dialect.RUNTIME, endpoint="e1")),
        ("/endpoints/e1/v1/chat/completions", Reach(Dialect.OPENAI, endpoint="e1")),
        ("/endpoints/e1/openai/v1/chat/completions", Reach(Dialect.OPENAI, endpoint="e1")),
        ("/endpoints/e1/tokenize", Reach(Dialect.OPENAI, endpoint="e1")),  # llama-server's: OpenAI's errors
        ("/endpoints/e1/inference-components/c/openai/apply-template", Reach(Dialect.OPENAI, endpoint="e1")),
        ("/tokenize", Reach(Dialect.PIER)),  # only under an endpoint
        ("/generate", Reach(Dialect.PIER)),  # a copy's, not the gateway's
        ("/service/GraniteServiceVersion20100801/operation/PutMetricData", Reach(Dialect.PIER)),
        ("/v1/chat/completions", Reach(Dialect.OPENAI, model_in_body=True)),
        ("/v1/completions", Reach(Dialect.OPENAI, model_in_body=True)),
        ("/v1/models", Reach(Dialect.OPENAI)),
        ("/v1/models/chat", Reach(Dialect.OPENAI)),  # the route answers only what the caller may call
        ("/v1/models/chat/ic", Reach(Dialect.OPENAI)),
        ("/pier/copies", Reach(Dialect.PIER)),
        ("/pier/copies/c-1/logs", Reach(Dialect.PIER)),
        ("/docs", Reach(Dialect.PIER)),  # anything unnamed needs admin
        ("/openapi.json", Reach(Dialect.PIER)),
        ("//", Reach(Dialect.PIER)),
        ("/ping/", Reach(Dialect.PIER)),
    ],
)
def test_reach_of(path: str, reach: Reach) -> None:
    assert reach_of(path) == reach


@pytest.mark.parametrize(
    ("path", "invokes", "audited"),
    [
        ("/ping", False, False),
        ("/console", False, False),
        ("/", False, True),
        ("/endpoints/e1/invocations", True, False),
        ("/v1/chat/completions", True, False),
        ("/pier/copies", False, True),
        ("/tokenize", False, True),
    ],
)
def test_what_a_reach_needs(path: str, invokes: bool, audited: bool) -> None:
    reach = reach_of(path)
    assert (reach.invokes, reach.audited) == (invokes, audited)
